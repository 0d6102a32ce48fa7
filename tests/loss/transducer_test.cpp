// Transducer loss: test vector A (REFERENCE.md section 5), a brute-force sum over all
// alignments, finite differences, and the batched reference against the fused kernel.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <random>

#include "core/error.h"
#include "loss/transducer.h"

namespace pipetrain::loss {
namespace {

at::Tensor vector_a_logits() {
  return torch::tensor({0.1, 0.6, 0.1, 0.1, 0.1, 0.1, 0.1, 0.6, 0.1, 0.1, 0.1, 0.1, 0.2, 0.8, 0.1,
                        0.1, 0.6, 0.1, 0.1, 0.1, 0.1, 0.1, 0.2, 0.1, 0.1, 0.7, 0.1, 0.2, 0.1, 0.1},
                       torch::kDouble)
      .view({2, 3, 5});
}
const at::Tensor vector_a_targets() { return torch::tensor({1, 2}, torch::kLong); }

TEST(TransducerKernel, VectorABlankZero) {
  at::Tensor logits = vector_a_logits();
  EXPECT_NEAR(transducer_loss_and_grad_(logits, vector_a_targets(), 0), 4.495666773770731, 1e-9);
}

TEST(TransducerKernel, VectorABlankFourLossAndGradient) {
  const std::vector<double> expected = {
      0.17703132,  -0.39992708, 0.17703132,  0.17703132,  -0.13116692, 0.12247062,
      0.12247062,  -0.181684,   0.12247062,  -0.1857276,  0.06269141,  0.06269141,
      0.06928471,  0.12624498,  -0.32091248, 0.05456069,  -0.2182428,  0.05456069,
      0.05456069,  0.05456069,  0.12073967,  0.12073967,  -0.48295838, 0.12073967,
      0.12073967,  0.30741188,  0.16871123,  0.18645471,  0.16871123,  -0.83128875};
  // The expected gradients are given to 8 decimals (rounding <= 5e-9). float32 (u = 6e-8):
  // the loss is a log-add-exp recursion over the 2 x 3 grid of 5-way log-softmaxes, <= ~20
  // roundings of a value <= 5.1: <= 20 u 5.1 ~ 6e-6; the gradients are differences of
  // exponentials of such values: the same order. 1e-5 covers both dtypes.
  for (auto dtype : {torch::kDouble, torch::kFloat}) {
    at::Tensor logits = vector_a_logits().to(dtype);
    const double loss = transducer_loss_and_grad_(logits, vector_a_targets(), 4);
    EXPECT_NEAR(loss, 5.09566688538, 1e-5);
    const at::Tensor grad = logits.to(torch::kDouble).flatten();
    for (int64_t i = 0; i < 30; ++i) EXPECT_NEAR(grad[i].item<double>(), expected[i], 1e-5) << i;
  }
}

TEST(TransducerKernel, GradientScaleMultipliesGradient) {
  at::Tensor a = vector_a_logits(), b = vector_a_logits();
  transducer_loss_and_grad_(a, vector_a_targets(), 4);
  transducer_loss_and_grad_(b, vector_a_targets(), 4, true, -0.25);
  EXPECT_TRUE(torch::allclose(b, a * -0.25, 1e-12, 1e-12));
}

// The unchecked entry the sample-wise loss uses: the same loss, as a 0-dim double tensor on the
// logits' device (nothing read back), and the same gradient written over the logits.
TEST(TransducerKernel, OnDeviceEntryGivesTheSameLossAsATensorAndTheSameGradient) {
  at::Tensor checked = vector_a_logits(), on_device = vector_a_logits();
  const double loss = transducer_loss_and_grad_(checked, vector_a_targets(), 4, true, 0.5);
  const at::Tensor device_loss =
      transducer_loss_and_grad_on_device_(on_device, vector_a_targets(), 4, true, 0.5);
  EXPECT_EQ(device_loss.dim(), 0);
  EXPECT_EQ(device_loss.scalar_type(), torch::kDouble);
  EXPECT_EQ(device_loss.item<double>(), loss);
  EXPECT_TRUE(torch::equal(on_device, checked));
}

// Oracle: -log of the summed probability of every alignment path (blank = advance t,
// label = advance u; the path ends with the blank out of (T-1, U)), built from plain libtorch
// ops so autograd gives the oracle's gradient w.r.t. the logits too.
at::Tensor brute_force_loss(const at::Tensor& logits, const std::vector<int64_t>& y, int64_t blank) {
  const at::Tensor lp = logits.log_softmax(2);
  const int64_t T = logits.size(0), U = int64_t(y.size());
  std::vector<at::Tensor> paths;  // log-probability of each complete alignment
  std::function<void(int64_t, int64_t, const at::Tensor&)> walk =
      [&](int64_t t, int64_t u, const at::Tensor& logp) {
        if (t == T - 1 && u == U) {
          paths.push_back(logp + lp[t][u][blank]);
          return;
        }
        if (u < U) walk(t, u + 1, logp + lp[t][u][y[u]]);
        if (t < T - 1) walk(t + 1, u, logp + lp[t][u][blank]);
      };
  walk(0, 0, torch::zeros({}, logits.options()));
  return -torch::logsumexp(torch::stack(paths), 0);
}

TEST(TransducerKernel, MatchesBruteForceOnRandomSmallCases) {
  std::mt19937 rng(7);
  torch::manual_seed(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t T = 1 + rng() % 4, U = rng() % 4, V = 2 + rng() % 4, blank = rng() % V;
    std::vector<int64_t> y(U);
    for (auto& label : y) label = (blank + 1 + rng() % (V - 1)) % V;  // never blank
    at::Tensor logits = torch::randn({T, U + 1, V}, torch::kDouble) * 2;
    // The oracle's loss and, by autograd through the sum over alignments, its gradient.
    const at::Tensor leaf = logits.clone().requires_grad_(true);
    const at::Tensor oracle = brute_force_loss(leaf, y, blank);
    oracle.backward();
    const double expected = oracle.item<double>();
    at::Tensor work = logits.clone();
    EXPECT_NEAR(transducer_loss_and_grad_(work, torch::tensor(y), blank), expected, 1e-10)
        << "T=" << T << " U=" << U << " V=" << V;
    // The kernel's in-place gradient (log-softmax folded in) against the oracle's, element-wise.
    const double max_error = (work - leaf.grad()).abs().max().item<double>();
    EXPECT_LT(max_error, 1e-8) << "gradient, T=" << T << " U=" << U << " V=" << V;
  }
}

TEST(TransducerKernel, GradientMatchesFiniteDifferences) {
  torch::manual_seed(3);
  const int64_t T = 4, U = 3, V = 5, blank = 2;
  const at::Tensor targets = torch::tensor({1, 4, 1}, torch::kLong);
  const at::Tensor logits = torch::randn({T, U + 1, V}, torch::kDouble);
  at::Tensor grad = logits.clone();
  transducer_loss_and_grad_(grad, targets, blank);
  const double eps = 1e-6;
  for (int64_t i = 0; i < logits.numel(); ++i) {
    at::Tensor plus = logits.clone(), minus = logits.clone();
    plus.view(-1)[i] += eps;
    minus.view(-1)[i] -= eps;
    const double fd = (transducer_loss_and_grad_(plus, targets, blank, false) -
                       transducer_loss_and_grad_(minus, targets, blank, false)) /
                      (2 * eps);
    EXPECT_NEAR(grad.view(-1)[i].item<double>(), fd, 1e-7) << i;
  }
}

TEST(TransducerBatched, MatchesKernelLossAndGradientOnRaggedBatch) {
  torch::manual_seed(11);
  const int64_t B = 4, T = 6, U = 3, V = 6, blank = 5;
  const at::Tensor logits = torch::randn({B, T, U + 1, V}, torch::kDouble).requires_grad_();
  const at::Tensor targets = torch::randint(0, V - 1, {B, U}, torch::kLong);
  const at::Tensor t_len = torch::tensor({6, 3, 1, 5}, torch::kLong);
  const at::Tensor u_len = torch::tensor({3, 0, 2, 1}, torch::kLong);
  for (auto reduction : {Reduction::Mean, Reduction::Sum}) {
    logits.mutable_grad() = at::Tensor();
    const at::Tensor loss =
        transducer_loss_batched(logits, targets, t_len, u_len, {blank, reduction});
    loss.backward();
    const double scale = reduction == Reduction::Mean ? 1.0 / B : 1.0;
    double expected_loss = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t Tb = t_len[b].item<int64_t>(), U1 = u_len[b].item<int64_t>() + 1;
      at::Tensor sample = logits.detach()[b].narrow(0, 0, Tb).narrow(1, 0, U1).clone();
      expected_loss += scale * transducer_loss_and_grad_(sample, targets[b].narrow(0, 0, U1 - 1),
                                                         blank, true, scale);
      const at::Tensor g = logits.grad()[b];
      EXPECT_TRUE(torch::allclose(g.narrow(0, 0, Tb).narrow(1, 0, U1), sample, 1e-9, 1e-12));
      const double inside = g.narrow(0, 0, Tb).narrow(1, 0, U1).abs().sum().item<double>();
      EXPECT_NEAR(g.abs().sum().item<double>(), inside, 1e-12);  // padding gets no gradient
    }
    EXPECT_NEAR(loss.item<double>(), expected_loss, 1e-9);
  }
  const at::Tensor per_sample =
      transducer_loss_batched(logits, targets, t_len, u_len, {blank, Reduction::None});
  EXPECT_EQ(per_sample.sizes(), (std::vector<int64_t>{B}));
}

TEST(TransducerErrors, BadInputsThrowUserError) {
  at::Tensor logits = vector_a_logits();
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::tensor({1}), 0), UserError);  // U mismatch
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::tensor({1, 2}), 5), UserError);
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::tensor({1, 2}), -1), UserError);
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::tensor({1, 0}), 0), UserError);  // blank
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::tensor({1, 7}), 0), UserError);
  EXPECT_THROW(transducer_loss_and_grad_(logits[0], torch::tensor({1, 2}), 0), UserError);
  EXPECT_THROW(transducer_loss_and_grad_(logits.transpose(1, 2), torch::tensor({1, 2}), 0),
               UserError);
  const at::Tensor batch = logits.unsqueeze(0);
  const at::Tensor y = torch::tensor({{1, 2}});
  const at::Tensor one = torch::tensor({1}), two = torch::tensor({2});
  EXPECT_THROW(transducer_loss_batched(batch, y, torch::tensor({3}), two), UserError);  // T
  EXPECT_THROW(transducer_loss_batched(batch, y, torch::tensor({0}), two), UserError);
  EXPECT_THROW(transducer_loss_batched(batch, y, two, torch::tensor({3})), UserError);  // U
  EXPECT_THROW(transducer_loss_batched(batch, y, torch::tensor({2, 2}), two), UserError);
  EXPECT_THROW(transducer_loss_batched(batch, torch::tensor({{1, 2, 3}}), two, two), UserError);
  EXPECT_THROW(transducer_loss_batched(batch, y, two, two, {9, Reduction::Mean}), UserError);
  // One label of a two-label lattice: the reference reads the first two label rows only, the
  // kernel's loss on them alone.
  const double first_label = transducer_loss_and_grad_(logits.narrow(1, 0, 2).contiguous(), one, 0, false);
  EXPECT_NEAR(transducer_loss_batched(batch, y, two, one).item<double>(), first_label, 1e-12);
}

}  // namespace
}  // namespace pipetrain::loss
