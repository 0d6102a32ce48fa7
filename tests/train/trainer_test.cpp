#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "train/lr_schedule.h"
#include "train/optim.h"
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
  const double before = trainer.evaluate();
  double first = 0, last = 0;
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const double loss = trainer.train_step(step).loss;
    if (step == 0) first = loss;
    last = loss;
  }
  EXPECT_NEAR(first, std::log(256.0), 0.3);  // uniform over bytes at initialisation
  EXPECT_LT(last, first - 1.5);
  EXPECT_LT(trainer.evaluate(), before - 1.5);
}

TEST(Trainer, MicrobatchAccumulationEqualsOneBigBatch) {
  Config one = tiny_config(), four = tiny_config();
  four.train.microbatches = 4;
  Trainer a(one, shared_data()), b(four, shared_data());
  for (int64_t step = 0; step < 3; ++step) {
    const auto ra = a.train_step(step), rb = b.train_step(step);
    EXPECT_NEAR(ra.loss, rb.loss, 1e-5 * ra.loss);
    EXPECT_NEAR(ra.grad_norm, rb.grad_norm, 1e-4 * ra.grad_norm);
  }
  const auto pa = a.parameters(), pb = b.parameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(torch::allclose(pa[i], pb[i], 1e-5, 1e-6)) << "parameter " << i;
  }
}

// model.loss_chunk_tokens: the head + loss as chunked cross-entropy (logits a few tokens at a
// time) trains exactly like the full logits: same per-step losses and gradient norms, and the
// same final weights, the tied embedding/head weight included (its gradient comes from both
// the embedding lookup and the chunked head).
TEST(Trainer, ChunkedCrossEntropyTrainsLikeFullLogits) {
  for (const int64_t chunk : {1, 5, 64, 1000}) {  // 1000: one chunk holds every token
    Config full = tiny_config(), chunked = tiny_config();
    full.train.microbatches = chunked.train.microbatches = 2;  // 64 tokens per microbatch
    chunked.model.loss_chunk_tokens = chunk;
    Trainer a(full, shared_data()), b(chunked, shared_data());
    for (int64_t step = 0; step < 4; ++step) {
      const auto ra = a.train_step(step), rb = b.train_step(step);
      EXPECT_NEAR(rb.loss, ra.loss, 1e-5 * ra.loss) << "chunk " << chunk << " step " << step;
      EXPECT_NEAR(rb.grad_norm, ra.grad_norm, 1e-5 * ra.grad_norm)
          << "chunk " << chunk << " step " << step;
    }
    EXPECT_NEAR(b.evaluate(), a.evaluate(), 1e-5 * a.evaluate()) << "chunk " << chunk;
    const auto na = a.model().named_parameters(), nb = b.model().named_parameters();
    ASSERT_EQ(na.size(), nb.size());
    for (size_t i = 0; i < na.size(); ++i) {
      auto want = na[i].value(), got = nb[i].value();
      if (na[i].key().find("qkv.bias") != std::string::npos) {
        // The key bias's gradient is exactly zero up to rounding, so Adam applies normalised
        // rounding noise to it: compare the query and value biases only.
        const int64_t d = full.model.d_model;
        want = torch::cat({want.slice(0, 0, d), want.slice(0, 2 * d)});
        got = torch::cat({got.slice(0, 0, d), got.slice(0, 2 * d)});
      }
      const double relative = (got - want).norm().item<double>() / want.norm().item<double>();
      EXPECT_LT(relative, 1e-5) << "chunk " << chunk << " " << na[i].key();
    }
  }
}

TEST(Trainer, ChunkedCrossEntropyHandlesALargerVocabularyOnBytes) {
  Config config = tiny_config();
  config.model.vocab_size = 1000;  // byte tokens are valid ids of a larger vocabulary
  config.model.loss_chunk_tokens = 16;
  Trainer trainer(config, shared_data());
  const double first = trainer.train_step(0).loss;
  EXPECT_NEAR(first, std::log(1000.0), 0.3);
  EXPECT_TRUE(std::isfinite(trainer.train_step(1).loss));
}

TEST(Trainer, DeterministicForASeed) {
  Trainer a(tiny_config(), shared_data()), b(tiny_config(), shared_data());
  for (int64_t step = 0; step < 3; ++step) EXPECT_EQ(a.train_step(step).loss, b.train_step(step).loss);
}

TEST(Trainer, EveryOptimizerTrains) {
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    Config config = tiny_config();
    config.train.optimizer = name;
    if (name == "sgd") config.train.lr = 0.3, config.train.min_lr = 0.03;
    Trainer trainer(config, shared_data());
    double first = trainer.train_step(0).loss, last = first;
    for (int64_t step = 1; step < 15; ++step) last = trainer.train_step(step).loss;
    EXPECT_LT(last, first - 0.5) << name;
  }
}

TEST(Optim, ClippingMatchesTorch) {
  torch::manual_seed(0);
  auto a = torch::randn({5, 3}), b = torch::randn({7});
  auto a2 = a.clone(), b2 = b.clone();
  a.mutable_grad() = torch::randn({5, 3}) * 10;
  b.mutable_grad() = torch::randn({7}) * 10;
  a2.mutable_grad() = a.grad().clone();
  b2.mutable_grad() = b.grad().clone();
  const double norm = std::sqrt(squared_grad_norm({a, b}));
  scale_grads_to_norm({a, b}, norm, 1.0);
  const double torch_norm = torch::nn::utils::clip_grad_norm_(std::vector<torch::Tensor>{a2, b2}, 1.0);
  EXPECT_NEAR(norm, torch_norm, 1e-4 * norm);
  EXPECT_TRUE(torch::allclose(a.grad(), a2.grad()));
  EXPECT_NEAR(std::sqrt(squared_grad_norm({a, b})), 1.0, 1e-5);
}

}  // namespace
}  // namespace pipetrain
