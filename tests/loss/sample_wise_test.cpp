// Sample-wise transducer loss == batched reference (loss, d(enc), d(pred), joint weight
// gradients) on random ragged batches; errors; a tiny transducer trains with it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "../tensor_exactness.h"
#include "core/error.h"
#include "loss/joint_network.h"
#include "loss/toy_transducer.h"

namespace pipetrain::loss {
namespace {

struct Grads {
  double loss;
  at::Tensor enc, pred;
  std::vector<at::Tensor> params;
};

struct RaggedCase {
  at::Tensor enc, pred, targets, t_len, u_len;
};

RaggedCase make_case(int64_t B, int64_t T, int64_t U, int64_t J, int64_t V, int64_t blank,
                     uint64_t seed) {
  torch::manual_seed(seed);
  RaggedCase c;
  c.enc = torch::randn({B, T, J}, torch::kDouble);
  c.pred = torch::randn({B, U + 1, J}, torch::kDouble);
  c.targets = (torch::randint(1, V, {B, U}, torch::kLong) + blank) % V;  // never blank
  c.t_len = torch::randint(1, T + 1, {B}, torch::kLong);
  c.u_len = torch::randint(0, U + 1, {B}, torch::kLong);
  c.t_len[0] = T;  // the padded extent is reached by some sample
  c.u_len[B - 1] = U;
  return c;
}

Grads run(JointNetwork& joint, const RaggedCase& c, bool sample_wise, Reduction reduction,
          int64_t budget, int64_t blank, double outer_scale) {
  joint->zero_grad();
  const at::Tensor enc = c.enc.clone().requires_grad_();
  const at::Tensor pred = c.pred.clone().requires_grad_();
  at::Tensor loss;
  if (sample_wise) {
    loss = sample_wise_transducer_loss(joint, enc, pred, c.targets, c.t_len, c.u_len,
                                       {blank, reduction, budget, nullptr});
  } else {
    loss = transducer_loss_batched(joint(enc, pred), c.targets, c.t_len, c.u_len,
                                   {blank, reduction});
  }
  (loss * outer_scale).backward();
  Grads g{loss.item<double>(), enc.grad(), pred.grad(), {}};
  for (const auto& p : joint->parameters()) g.params.push_back(p.grad().clone());
  return g;
}

// Both compute in float64 (the proofs' tolerance, tests/exactness.h): every element to 1e-9.
void expect_close(const at::Tensor& a, const at::Tensor& b, const char* what) {
  ASSERT_TRUE(a.defined() && b.defined()) << what;
  EXPECT_EQ(a.scalar_type(), torch::kDouble) << what;
  EXPECT_EQ(pipetrain::testing::elementwise_mismatch(a, b), "") << what;
}

// The joint's hidden, tanh(enc + pred) (2 sigmoid(2x) - 1 on a CPU in float32 and float64),
// against at::tanh of the broadcast sum: values and both inputs' gradients under a random
// upstream gradient. bfloat16 keeps at::tanh itself: exactly equal.
TEST(JointHidden, IsTanhOfTheBroadcastSumWithItsGradients) {
  for (const auto& [dtype, tolerance] : {std::pair{torch::kDouble, 1e-15}, std::pair{torch::kFloat, 3e-7},
                                         std::pair{torch::kBFloat16, 0.0}}) {
    torch::manual_seed(7);
    const at::Tensor enc = (2 * torch::randn({2, 5, 16}, torch::kDouble)).to(dtype).requires_grad_();
    const at::Tensor pred = (2 * torch::randn({2, 4, 16}, torch::kDouble)).to(dtype).requires_grad_();
    const at::Tensor upstream = torch::randn({2, 5, 4, 16}, torch::kDouble).to(dtype);
    const at::Tensor hidden = joint_hidden(enc, pred);
    const at::Tensor reference = torch::tanh(enc.unsqueeze(2) + pred.unsqueeze(1));
    ASSERT_EQ(hidden.sizes(), reference.sizes());
    EXPECT_LE((hidden - reference).abs().max().item<double>(), tolerance) << dtype;
    const auto grads = torch::autograd::grad({hidden}, {enc, pred}, {upstream});
    const auto expected = torch::autograd::grad({reference}, {enc, pred}, {upstream});
    // Each gradient sums 4 or 5 products of the upstream gradient and 1 - tanh^2.
    const double gradient_tolerance = dtype == torch::kBFloat16 ? 0.0 : 40 * tolerance;
    for (size_t k = 0; k < 2; ++k) {
      EXPECT_LE((grads[k] - expected[k]).abs().max().item<double>(), gradient_tolerance) << dtype << k;
    }
  }
}

TEST(SampleWiseTransducer, EqualsBatchedOnRaggedBatches) {
  const int64_t J = 6, V = 7;
  int trial = 0;
  for (int64_t budget : {int64_t{0}, int64_t{40000}, int64_t{1} << 30}) {
    for (auto reduction : {Reduction::Mean, Reduction::Sum}) {
      const int64_t blank = trial % V;
      const RaggedCase c = make_case(5, 7, 4, J, V, blank, 100 + trial++);
      torch::manual_seed(1);
      JointNetwork joint(J, V);
      joint->to(torch::kDouble);
      const Grads ref = run(joint, c, false, reduction, 0, blank, 2.5);
      const Grads got = run(joint, c, true, reduction, budget, blank, 2.5);
      EXPECT_TRUE(pipetrain::testing::exactly_close(got.loss, ref.loss)) << got.loss << " vs " << ref.loss;
      expect_close(got.enc, ref.enc, "d(enc)");
      expect_close(got.pred, ref.pred, "d(pred)");
      ASSERT_EQ(got.params.size(), ref.params.size());
      for (size_t k = 0; k < got.params.size(); ++k) expect_close(got.params[k], ref.params[k], "joint");
    }
  }
}

TEST(SampleWiseTransducer, GroupsReportProgressAndForwardOnlyWithoutGrad) {
  const RaggedCase c = make_case(6, 5, 3, 4, 5, 0, 42);
  torch::manual_seed(2);
  JointNetwork joint(4, 5);
  joint->to(torch::kDouble);
  std::vector<int64_t> done;
  SampleWiseOptions options;
  options.memory_budget_bytes = 20000;  // a few small samples per group
  options.on_progress = [&](int64_t n, int64_t total) {
    done.push_back(n);
    EXPECT_EQ(total, 6);
  };
  torch::NoGradGuard no_grad;
  const at::Tensor loss =
      sample_wise_transducer_loss(joint, c.enc, c.pred, c.targets, c.t_len, c.u_len, options);
  EXPECT_FALSE(loss.requires_grad());
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(done.back(), 6);
  EXPECT_LT(done.size(), 6u);  // some samples shared a group
  const double ref =
      transducer_loss_batched(joint(c.enc, c.pred), c.targets, c.t_len, c.u_len).item<double>();
  EXPECT_NEAR(loss.item<double>(), ref, 1e-9);
}

TEST(SampleWiseTransducer, BadInputsThrowUserError) {
  const RaggedCase c = make_case(2, 4, 3, 4, 5, 0, 5);
  JointNetwork joint(4, 5);
  joint->to(torch::kDouble);
  auto call = [&](const at::Tensor& enc, const at::Tensor& pred, const at::Tensor& y,
                  const at::Tensor& tl, const at::Tensor& ul, SampleWiseOptions o = {}) {
    return sample_wise_transducer_loss(joint, enc, pred, y, tl, ul, o);
  };
  EXPECT_THROW(call(c.enc[0], c.pred, c.targets, c.t_len, c.u_len), UserError);
  EXPECT_THROW(call(c.enc, c.pred.narrow(0, 0, 1), c.targets, c.t_len, c.u_len), UserError);
  EXPECT_THROW(call(c.enc, c.pred.narrow(1, 0, 3), c.targets, c.t_len, c.u_len), UserError);
  EXPECT_THROW(call(c.enc, c.pred, c.targets, torch::tensor({5, 1}), c.u_len), UserError);
  EXPECT_THROW(call(c.enc, c.pred, c.targets, c.t_len, torch::tensor({4, 1})), UserError);
  EXPECT_THROW(call(c.enc, c.pred, torch::full({2, 3}, 9, torch::kLong), c.t_len,
                    torch::tensor({3, 3})), UserError);  // label >= V
  EXPECT_THROW(call(c.enc, c.pred, c.targets, c.t_len, c.u_len, {7, Reduction::Mean, 0, nullptr}),
               UserError);  // blank >= V
  EXPECT_THROW(call(c.enc, c.pred, c.targets, c.t_len, c.u_len, {0, Reduction::None, 0, nullptr}),
               UserError);
}

TEST(ToyTransducerTraining, FewStepsLowerTheLoss) {
  torch::manual_seed(0);
  ToyTransducer model(5, 24, 24);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(0.02));
  const ToyTransducerBatch held_out = make_toy_transducer_batch(32, 5, 4, 999);
  const double before = model->loss(held_out, true).item<double>();
  for (int step = 0; step < 25; ++step) {
    const ToyTransducerBatch batch = make_toy_transducer_batch(16, 5, 4, step);
    optimizer.zero_grad();
    model->loss(batch, true).backward();
    optimizer.step();
  }
  const double after = model->loss(held_out, true).item<double>();
  const double after_batched = model->loss(held_out, false).item<double>();
  // float32 (unit roundoff u = 6e-8), the same weights both ways: the paths differ in how the
  // joint's [T, U+1] grid is evaluated and summed: 24-term dot products (<= 24 u) feeding an
  // alpha recursion of <= T + U ~ 20 log-add-exp steps (~3 u each): <= ~110 u ~ 7e-6 relative,
  // worst case; 1e-4 keeps a margin of ~15.
  EXPECT_NEAR(after, after_batched, 1e-4 * after);
  EXPECT_LT(after, 0.6 * before) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace pipetrain::loss
