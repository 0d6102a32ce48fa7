#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "../tensor_exactness.h"
#include "train/lr_schedule.h"
#include "train/optim.h"
#include "data/text_dataset.h"
#include "device/host_reads.h"
#include "train/trainer.h"

namespace pipetrain {
namespace {

Config tiny_config() {
  Config c;
  c.model.layers = 2;
  c.model.d_model = 32;
  c.model.heads = 4;
  c.model.seq_len = 16;
  c.train.batch_size = 8;
  c.train.microbatches = 1;  // one big batch (the default splits it for the pipeline)
  c.train.steps = 30;
  c.train.warmup_steps = 5;
  c.train.lr = 3e-3;
  c.train.min_lr = 3e-4;
  c.eval.batches = 2;
  return c;
}

// The exactness proofs run in float64 (tests/exactness.h has the tolerance and why).
Config proof_config() {
  Config c = tiny_config();
  c.model.dtype = "float64";
  return c;
}

// Every weight element of `got` equals `want`'s to the proofs' tolerance, and both are float64.
void expect_same_weights(torch::nn::Module& got, torch::nn::Module& want, const std::string& label) {
  const auto g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size()) << label;
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(g[i].key(), w[i].key()) << label;
    ASSERT_EQ(g[i].value().scalar_type(), torch::kFloat64) << label << " " << g[i].key();
    EXPECT_EQ(testing::elementwise_mismatch(g[i].value(), w[i].value()), "")
        << label << " " << w[i].key();
  }
}

const TextDataset& shared_data() {
  static const TextDataset data(std::string(PIPETRAIN_SOURCE_DIR) + "/data/tinyshakespeare.txt",
                                0.1, 16);
  return data;
}

TEST(LrSchedule, WarmupThenCosine) {
  TrainConfig t;
  t.lr = 1.0;
  t.min_lr = 0.1;
  t.warmup_steps = 4;
  t.steps = 14;
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 0), 0.25);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 3), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 4), 1.0);       // start of the decay
  EXPECT_NEAR(learning_rate_at(t, 8), 0.1 + 0.45 * (1 + std::cos(M_PI * 4 / 9)), 1e-12);
  EXPECT_DOUBLE_EQ(learning_rate_at(t, 13), 0.1);      // last step reaches min_lr
}

TEST(Trainer, TrainingLowersTheLoss) {
  Config config = tiny_config();
  Trainer trainer(config, shared_data());
  const double before = trainer.evaluate(false).loss;
  double first = 0, last = 0;
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const double loss = trainer.train_step(step).loss;
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_NEAR(first, std::log(256.0), 0.3);  // uniform over bytes at initialisation
  EXPECT_LT(last, first - 1.5);
  EXPECT_LT(trainer.evaluate(false).loss, before - 1.5);
}

// model.dtype = "float64": the weights start as float32's initial values (converted exactly),
// and the gradients and the optimizer state follow the weights' dtype.
TEST(Trainer, Float64KeepsWeightsGradientsAndOptimizerStateInFloat64) {
  Trainer narrow(tiny_config(), shared_data()), wide(proof_config(), shared_data());
  const auto n = narrow.parameters(), w = wide.parameters();
  ASSERT_EQ(n.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(w[i].scalar_type(), torch::kFloat64) << "parameter " << i;
    EXPECT_TRUE(torch::equal(w[i], n[i].to(torch::kFloat64))) << "parameter " << i;
  }
  wide.train_step(0);
  for (const auto& p : wide.parameters()) EXPECT_EQ(p.grad().scalar_type(), torch::kFloat64);
  const auto state = optimizer_state_tensors(wide.optimizer(), wide.model());
  ASSERT_FALSE(state.empty());
  for (const auto& [name, tensor] : state) {
    if (name.size() < 5 || name.substr(name.size() - 5) != ".step") {
      EXPECT_EQ(tensor.scalar_type(), torch::kFloat64) << name;
    }
  }
}

// Gradient accumulation over 4 microbatches is one big batch's step: same losses, gradient
// norms and every weight element after 3 Adam steps, to the float64 proofs' 1e-9. (In float32
// at 1e-5 this failed on a fresh CPU: Adam magnifies last-bit differences of the summed
// microbatch gradients where a gradient is near zero.)
TEST(Trainer, MicrobatchAccumulationEqualsOneBigBatch) {
  Config one = proof_config(), four = proof_config();
  four.train.microbatches = 4;
  Trainer a(one, shared_data()), b(four, shared_data());
  for (int64_t step = 0; step < 3; ++step) {
    const auto ra = a.train_step(step), rb = b.train_step(step);
    EXPECT_TRUE(testing::exactly_close(rb.loss, ra.loss)) << rb.loss << " vs " << ra.loss;
    EXPECT_TRUE(testing::exactly_close(rb.grad_norm, ra.grad_norm))
        << rb.grad_norm << " vs " << ra.grad_norm;
  }
  expect_same_weights(b.model(), a.model(), "4 microbatches");
}

// model.loss_chunk_tokens: the head + loss as chunked cross-entropy (logits a few tokens at a
// time) trains exactly like the full logits: same per-step losses and gradient norms, and the
// same final weights, the tied embedding/head weight included (its gradient comes from both
// the embedding lookup and the chunked head). float64, every element to 1e-9.
TEST(Trainer, ChunkedCrossEntropyTrainsLikeFullLogits) {
  for (const int64_t chunk : {1, 5, 64, 1000}) {  // 1000: one chunk holds every token
    Config full = proof_config(), chunked = proof_config();
    full.train.microbatches = chunked.train.microbatches = 2;  // 64 tokens per microbatch
    chunked.model.loss_chunk_tokens = chunk;
    Trainer a(full, shared_data()), b(chunked, shared_data());
    for (int64_t step = 0; step < 4; ++step) {
      const auto ra = a.train_step(step), rb = b.train_step(step);
      EXPECT_TRUE(testing::exactly_close(rb.loss, ra.loss))
          << "chunk " << chunk << " step " << step << ": " << rb.loss << " vs " << ra.loss;
      EXPECT_TRUE(testing::exactly_close(rb.grad_norm, ra.grad_norm))
          << "chunk " << chunk << " step " << step << ": " << rb.grad_norm << " vs " << ra.grad_norm;
    }
    const double want = a.evaluate(false).loss, got = b.evaluate(false).loss;
    EXPECT_TRUE(testing::exactly_close(got, want)) << "chunk " << chunk << ": " << got << " vs " << want;
    expect_same_weights(b.model(), a.model(), "chunk " + std::to_string(chunk));
  }
}

// Byte tokens are valid ids of a larger vocabulary: at 1000 the chunked head still trains like
// the full logits (float64, every step's loss and gradient norm, the final weights).
TEST(Trainer, ChunkedCrossEntropyHandlesALargerVocabularyOnBytes) {
  Config full = proof_config();
  full.model.vocab_size = 1000;
  Config chunked = full;
  chunked.model.loss_chunk_tokens = 16;
  Trainer a(full, shared_data()), b(chunked, shared_data());
  for (int64_t step = 0; step < 3; ++step) {
    const auto ra = a.train_step(step), rb = b.train_step(step);
    EXPECT_TRUE(testing::exactly_close(rb.loss, ra.loss)) << step << ": " << rb.loss << " vs " << ra.loss;
    EXPECT_TRUE(testing::exactly_close(rb.grad_norm, ra.grad_norm)) << step;
  }
  expect_same_weights(b.model(), a.model(), "vocabulary 1000");
}

TEST(Trainer, DeterministicForASeed) {
  Trainer a(tiny_config(), shared_data()), b(tiny_config(), shared_data());
  for (int64_t step = 0; step < 3; ++step) EXPECT_EQ(a.train_step(step).loss, b.train_step(step).loss);
}

TEST(Trainer, EveryOptimizerTrains) {
  for (const std::string name : {"sgd", "adam", "adamw", "muon"}) {
    Config config = tiny_config();
    config.train.optimizer = name;
    if (name == "sgd") config.train.lr = 0.3, config.train.min_lr = 0.03;
    Trainer trainer(config, shared_data());
    double first = trainer.train_step(0).loss, last = first;
    for (int64_t step = 1; step < 15; ++step) last = trainer.train_step(step).loss;
    EXPECT_LT(last, first - 0.5) << name;
  }
}

// In float64: 22 squares summed in another order differ by <= 22 ulps (~5e-15 relative).
TEST(Optim, ClippingMatchesTorch) {
  torch::manual_seed(0);
  const auto f64 = torch::kFloat64;
  auto a = torch::randn({5, 3}, f64), b = torch::randn({7}, f64);
  auto a2 = a.clone(), b2 = b.clone();
  a.mutable_grad() = torch::randn({5, 3}, f64) * 10;
  b.mutable_grad() = torch::randn({7}, f64) * 10;
  a2.mutable_grad() = a.grad().clone();
  b2.mutable_grad() = b.grad().clone();
  const double norm = std::sqrt(squared_grad_norm({a, b}));
  scale_grads_to_norm({a, b}, norm, 1.0);
  const double torch_norm = torch::nn::utils::clip_grad_norm_(std::vector<torch::Tensor>{a2, b2}, 1.0);
  EXPECT_NEAR(norm, torch_norm, 1e-13 * norm);
  EXPECT_TRUE(torch::allclose(a.grad(), a2.grad(), 1e-13, 0));
  EXPECT_TRUE(torch::allclose(b.grad(), b2.grad(), 1e-13, 0));
  // torch's formula: scale by max_norm / (norm + 1e-6), so the new norm is norm / (norm + 1e-6).
  EXPECT_NEAR(std::sqrt(squared_grad_norm({a, b})), norm / (norm + 1e-6), 1e-13);
}

// The one-process form keeps the norm and the coefficient on the device: the same norm (bitwise:
// the same float64 operations), the same clipped gradients, and gradients under the limit
// multiplied by exactly 1 (bitwise unchanged). Closed form: [3, 4] and [12] have norm 13.
TEST(Optim, ClippingOnTheDeviceEqualsTheHostForm) {
  const auto f64 = torch::kFloat64;
  auto a = torch::zeros({2}, f64), b = torch::zeros({1}, f64), c = torch::zeros({3}, f64);
  a.mutable_grad() = torch::tensor({3.0, 4.0}, f64);
  b.mutable_grad() = torch::tensor({12.0}, f64);
  const torch::Tensor norm = grad_norm_on_device({a, b, c});  // c has no gradient
  EXPECT_EQ(norm.item<double>(), 13.0);
  EXPECT_EQ(norm.item<double>(), std::sqrt(squared_grad_norm({a, b})));
  clip_grads_to_norm({a, b}, norm, 20.0);  // under the limit
  EXPECT_TRUE(torch::equal(a.grad(), torch::tensor({3.0, 4.0}, f64)));
  auto a2 = a.clone(), b2 = b.clone();
  a2.mutable_grad() = a.grad().clone();
  b2.mutable_grad() = b.grad().clone();
  clip_grads_to_norm({a, b}, norm, 6.5);
  scale_grads_to_norm({a2, b2}, 13.0, 6.5);
  EXPECT_TRUE(torch::equal(a.grad(), a2.grad()));
  EXPECT_TRUE(torch::equal(b.grad(), b2.grad()));
  EXPECT_NEAR(b.grad().item<double>(), 12.0 * 6.5 / (13.0 + 1e-6), 1e-15);
}

TEST(Trainer, AStepReadsTheNormAndTheLossOnTheHostAfterQueueingTheUpdate) {
  // What waits for a GPU, counted on the CPU (device/host_reads.h): a step of one process reads
  // two values, the gradient norm and the loss, both after the optimizer's update is queued, so
  // the host runs ahead of the device through the whole forward, backward and update. The only
  // other reads are inside the CPU's fused AdamW, which reads each parameter's step count (the
  // GPU's kernel reads it on the device).
  for (int variant = 0; variant < 4; ++variant) {
    Config c = tiny_config();
    if (variant == 1) c.train.microbatches = 4;
    if (variant == 2) c.model.loss_chunk_tokens = 32;
    if (variant == 3) c.model.dtype = "bfloat16";
    Trainer trainer(c, shared_data());
    const int64_t tensors = int64_t(trainer.parameters().size());
    for (int64_t step = 0; step < 2; ++step) {
      device::HostReads reads;
      trainer.train_step(step);
      const std::string where = std::to_string(variant) + ": " + reads.describe();
      EXPECT_EQ(reads.values_read_by_host_code("aten::_fused_adamw_"), 2) << where;
      EXPECT_EQ(reads.values_read_by_host_code(), 2) << where;
      EXPECT_EQ(reads.values_read_inside("aten::_fused_adamw_"), tensors) << where;
      EXPECT_EQ(reads.values(), 2 + tensors) << where;
      EXPECT_EQ(reads.value_dependent_shapes(), 0) << where;
    }
  }
}

}  // namespace
}  // namespace pipetrain
