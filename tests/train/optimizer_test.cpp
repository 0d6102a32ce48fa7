// Muon and the error-feedback correction against independent oracles, in float64:
// - Newton-Schulz acts on singular values alone: NS5(A S B^T) = A f(S / ||S||) B^T, f the
//   quintic composed 5 times (a closed form through a matrix built from its SVD);
// - one Muon + AdamW update computed by hand from that closed form;
// - several steps against a straightforward re-implementation written here;
// - error feedback's W(t+1) = W(t) - 2 u(t) + u(t-1) against the plain optimizer's updates;
// - state saved as checkpoint entries and loaded into a fresh optimizer continues exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "model/state_io.h"
#include "../tensor_exactness.h"
#include "train/adamw_step.h"
#include "train/muon.h"
#include "train/optim.h"

namespace pipetrain {
namespace {

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

constexpr double kTight = 1e-12;  // float64: only summation order differs from the oracles

// The parameters here carry GPT's names; GPT's rule tells Muon's matrices.
const ParameterRoles gpt_roles = [](const std::string& name, const std::vector<int64_t>&) {
  return parameter_role(name);
};

// The quintic composed `steps` times: what NS does to one normalised singular value.
double quintic_composed(double s, int steps = 5) {
  for (int i = 0; i < steps; ++i) {
    s = kNewtonSchulzA * s + kNewtonSchulzB * s * s * s + kNewtonSchulzC * std::pow(s, 5);
  }
  return s;
}

// An orthonormal [rows, cols] basis (rows >= cols) from a seeded QR.
torch::Tensor orthonormal_columns(int64_t rows, int64_t cols, uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  const auto a = torch::randn({rows, cols}, generator, torch::kFloat64);
  return std::get<0>(torch::linalg_qr(a));
}

// A [rows, cols] matrix A diag(s) B^T and the NS5 result its SVD predicts.
struct KnownSvd {
  torch::Tensor matrix, orthogonalized;
};

KnownSvd known_svd(int64_t rows, int64_t cols, const std::vector<double>& singular, uint64_t seed) {
  const int64_t k = int64_t(singular.size());
  const auto left = orthonormal_columns(rows, k, seed), right = orthonormal_columns(cols, k, seed + 1);
  const auto s = torch::tensor(singular, torch::kFloat64);
  const auto matrix = left.mm(torch::diag(s)).mm(right.t());
  const double norm = s.norm().item<double>(), shrink = norm / (norm + 1e-7);
  std::vector<double> mapped;
  for (double v : singular) mapped.push_back(quintic_composed(v / norm * shrink));
  return {matrix, left.mm(torch::diag(torch::tensor(mapped, torch::kFloat64))).mm(right.t())};
}

TEST(NewtonSchulz, MapsEachSingularValueThroughTheQuintic) {
  // Wide, tall (iterated transposed) and square; condition numbers up to 100.
  const std::vector<std::tuple<int64_t, int64_t, std::vector<double>>> shapes = {
      {4, 6, {3.0, 1.0, 0.2, 0.05}}, {6, 4, {1.0, 0.9, 0.5, 0.01}}, {5, 5, {2, 2, 1, 0.5, 0.1}}};
  uint64_t seed = 7;
  for (const auto& [rows, cols, singular] : shapes) {
    const auto want = known_svd(rows, cols, singular, seed += 2);
    const auto got = newton_schulz_orthogonalize(want.matrix);
    EXPECT_EQ(testing::elementwise_mismatch(got, want.orthogonalized, kTight, kTight), "")
        << rows << "x" << cols;
    // Keller Jordan's coefficients trade exactness for speed: every singular value of a matrix
    // this well conditioned lands in [0.68, 1.21] (the quintic's range on [0.004, 1]).
    const auto values = torch::linalg_svdvals(got);
    EXPECT_GE(values.min().item<double>(), 0.68) << rows << "x" << cols;
    EXPECT_LE(values.max().item<double>(), 1.21) << rows << "x" << cols;
  }
}

TrainConfig muon_config() {
  TrainConfig train;
  train.optimizer = "muon";
  train.lr = 1e-3;
  train.muon_lr = 0.05;
  train.muon_momentum = 0.9;
  train.beta1 = 0.9;
  train.beta2 = 0.99;
  train.eps = 1e-8;
  train.weight_decay = 0.1;
  return train;
}

torch::Tensor leaf(const torch::Tensor& values) { return values.clone().requires_grad_(true); }

// First step from zero state: M = (1-b) G, U = (1-b) G + b M = (1-b)(1+b) G (same singular
// vectors as G), W' = W (1 - lr wd) - lr sqrt(max(1, rows/cols)) NS5(U); the bias gets AdamW's
// first step, m_hat = g and v_hat = g^2.
TEST(Muon, OneUpdateMatchesTheClosedForm) {
  const TrainConfig train = muon_config();
  const auto grad = known_svd(3, 2, {2.0, 0.5}, 3);
  const double beta = train.muon_momentum;
  const auto nesterov = known_svd(3, 2, {2.0 * (1 - beta) * (1 + beta), 0.5 * (1 - beta) * (1 + beta)}, 3);
  const auto w0 = torch::tensor({{0.5, -0.25}, {1.0, 0.125}, {-0.75, 0.3}}, torch::kFloat64);
  const auto b0 = torch::tensor({0.2, -0.1, 0.05}, torch::kFloat64);
  const auto bias_grad = torch::tensor({0.3, -2e-3, 0.0}, torch::kFloat64);
  auto weight = leaf(w0), bias = leaf(b0);
  auto optimizer = make_optimizer(Named{{"layer1.fc.weight", weight}, {"layer1.fc.bias", bias}}, train, gpt_roles);
  weight.mutable_grad() = grad.matrix.clone();
  bias.mutable_grad() = bias_grad.clone();
  optimizer->step();

  const double muon_lr = train.muon_lr;
  const auto want_weight = w0 * (1 - muon_lr * train.weight_decay) -
                           muon_lr * std::sqrt(1.5) * nesterov.orthogonalized;
  EXPECT_EQ(testing::elementwise_mismatch(weight, want_weight, kTight, kTight), "");
  const auto want_bias = b0 * (1 - train.lr * train.weight_decay) -
                         train.lr * bias_grad / (bias_grad.abs() + train.eps);
  EXPECT_EQ(testing::elementwise_mismatch(bias, want_bias, kTight, kTight), "");
}

// ---- a straightforward re-implementation of Muon + AdamW, one parameter at a time ----

torch::Tensor reference_newton_schulz(torch::Tensor x) {
  const bool transpose = x.size(0) > x.size(1);
  if (transpose) x = x.t();
  x = x / (x.norm() + 1e-7);
  for (int i = 0; i < 5; ++i) {
    const auto a = x.mm(x.t());
    x = kNewtonSchulzA * x + (kNewtonSchulzB * a + kNewtonSchulzC * a.mm(a)).mm(x);
  }
  return transpose ? x.t() : x;
}

struct ReferenceParam {
  bool muon = false;
  torch::Tensor weight, m, v;  // Muon uses m as its momentum
  int steps = 0;
};

void reference_step(ReferenceParam& p, const torch::Tensor& g, const TrainConfig& train,
                    double schedule_lr) {
  if (p.muon) {
    const double lr = schedule_lr * train.muon_lr / train.lr, beta = train.muon_momentum;
    p.m = beta * p.m + (1 - beta) * g;
    const auto u = (1 - beta) * g + beta * p.m;
    const double scale = std::sqrt(std::max(1.0, double(p.weight.size(0)) / double(p.weight.size(1))));
    p.weight = p.weight * (1 - lr * train.weight_decay) - lr * scale * reference_newton_schulz(u);
    return;
  }
  ++p.steps;
  p.m = train.beta1 * p.m + (1 - train.beta1) * g;
  p.v = train.beta2 * p.v + (1 - train.beta2) * g * g;
  const auto m_hat = p.m / (1 - std::pow(train.beta1, p.steps));
  const auto v_hat = p.v / (1 - std::pow(train.beta2, p.steps));
  p.weight = p.weight * (1 - schedule_lr * train.weight_decay) -
             schedule_lr * m_hat / (v_hat.sqrt() + train.eps);
}

// A stage's worth of GPT parameters: embedding, matrices (tall and wide), gain, bias, head copy.
Named small_stage(uint64_t seed) {
  auto generator = at::detail::createCPUGenerator(seed);
  const std::vector<std::pair<std::string, std::vector<int64_t>>> shapes = {
      {"layer0.token_weight", {8, 4}}, {"layer1.qkv.weight", {12, 4}},
      {"layer1.fc_out.weight", {4, 16}}, {"layer1.ln1.weight", {4}},
      {"layer1.qkv.bias", {12}},         {"layer2.tied_weight", {8, 4}}};
  Named named;
  for (const auto& [name, shape] : shapes) {
    named.emplace_back(name, leaf(torch::randn(shape, generator, torch::kFloat64) * 0.5));
  }
  return named;
}

// Step t's gradient of parameter i: seeded, so any two runs see the same ones.
torch::Tensor gradient_for(const torch::Tensor& p, int step, size_t index) {
  auto generator = at::detail::createCPUGenerator(uint64_t(1000 * step + index));
  return torch::randn(p.sizes(), generator, torch::kFloat64);
}

void apply_gradients(const Named& named, int step) {
  for (size_t i = 0; i < named.size(); ++i) {
    named[i].second.mutable_grad() = gradient_for(named[i].second, step, i);
  }
}

TEST(Muon, StepsMatchAStraightforwardReimplementation) {
  const TrainConfig train = muon_config();
  const Named named = small_stage(5);
  std::vector<ReferenceParam> reference;
  for (const auto& [name, p] : named) {
    const bool matrix = name.find("qkv.weight") != std::string::npos || name.find("fc_out") != std::string::npos;
    reference.push_back({matrix, p.detach().clone(), torch::zeros_like(p), torch::zeros_like(p)});
  }
  auto optimizer = make_optimizer(named, train, gpt_roles);
  const std::vector<double> schedule = {2e-4, 1e-3, 6e-4, 3e-4};  // warm-up, then decay
  for (int step = 0; step < int(schedule.size()); ++step) {
    apply_gradients(named, step);
    set_learning_rate(*optimizer, schedule[size_t(step)]);
    optimizer->step();
    for (size_t i = 0; i < named.size(); ++i) {
      reference_step(reference[i], named[i].second.grad(), train, schedule[size_t(step)]);
    }
  }
  for (size_t i = 0; i < named.size(); ++i) {
    EXPECT_EQ(testing::elementwise_mismatch(named[i].second, reference[i].weight, kTight, kTight), "")
        << named[i].first;
  }
  // The checkpoint names: Muon's matrices keep a momentum, the rest AdamW's moments and step.
  std::map<std::string, int64_t> entries;
  for (const auto& [name, tensor] : optimizer_state_tensors(*optimizer, named)) entries[name] = tensor.numel();
  EXPECT_EQ(entries.count("layer1.qkv.weight.momentum_buffer"), 1u);
  EXPECT_EQ(entries.count("layer1.qkv.weight.exp_avg"), 0u);
  EXPECT_EQ(entries.count("layer0.token_weight.exp_avg_sq"), 1u);
  EXPECT_EQ(entries.count("layer2.tied_weight.step"), 1u);
  EXPECT_EQ(entries.size(), 2u * 1 + 4u * 3);
}

// ---- error feedback ----

// With no weight decay an update depends on the gradients alone, so the corrected run's weights
// follow from the plain run's updates u(t): W(t+1) = W(t) - u(t) - (u(t) - u(t-1)), no
// correction at the first update.
class ErrorFeedback : public ::testing::TestWithParam<std::string> {};

TEST_P(ErrorFeedback, MovesByTheChangeOfTheUpdate) {
  TrainConfig train = muon_config();
  train.optimizer = GetParam();
  train.weight_decay = 0;
  const Named plain_params = small_stage(9), corrected_params = small_stage(9);
  auto plain = make_optimizer(plain_params, train, gpt_roles);
  train.delay_correction = "error_feedback";
  auto corrected = make_optimizer(corrected_params, train, gpt_roles);
  std::vector<torch::Tensor> want, previous(plain_params.size());
  for (const auto& [name, p] : plain_params) want.push_back(p.detach().clone());
  for (int step = 0; step < 4; ++step) {
    apply_gradients(plain_params, step);
    apply_gradients(corrected_params, step);
    std::vector<torch::Tensor> before;
    for (const auto& [name, p] : plain_params) before.push_back(p.detach().clone());
    plain->step();
    corrected->step();
    for (size_t i = 0; i < want.size(); ++i) {
      const auto update = before[i] - plain_params[i].second.detach();
      want[i] = want[i] - update - (step == 0 ? torch::zeros_like(update) : update - previous[i]);
      previous[i] = update;
      EXPECT_EQ(testing::elementwise_mismatch(corrected_params[i].second, want[i], kTight, kTight), "")
          << plain_params[i].first << " after step " << step;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ErrorFeedback, ::testing::Values("sgd", "adamw", "muon"));

// SGD without momentum, u(t) = lr g(t): W3 = W0 - lr (2 g2 + g1 + g0), closed form.
TEST(ErrorFeedbackSgd, ThreeStepsMatchTheClosedForm) {
  TrainConfig train;
  train.optimizer = "sgd";
  train.momentum = 0;
  train.weight_decay = 0;
  train.lr = 0.1;
  train.delay_correction = "error_feedback";
  auto w = leaf(torch::tensor({1.0, -2.0}, torch::kFloat64));
  auto optimizer = make_optimizer(std::vector<torch::Tensor>{w}, train);
  const std::vector<torch::Tensor> g = {torch::tensor({1.0, 0.5}, torch::kFloat64),
                                        torch::tensor({-3.0, 0.25}, torch::kFloat64),
                                        torch::tensor({2.0, 4.0}, torch::kFloat64)};
  for (const auto& grad : g) {
    w.mutable_grad() = grad.clone();
    optimizer->step();
  }
  // W1 = W0 - lr g0; W2 = W1 - 2 lr g1 + lr g0 = W0 - 2 lr g1; W3 = W2 - 2 lr g2 + lr g1.
  const auto want = torch::tensor({1.0, -2.0}, torch::kFloat64) - 0.1 * (2 * g[2] + g[1]);
  EXPECT_EQ(testing::elementwise_mismatch(w, want, kTight, kTight), "");
}

// The state as checkpoint entries, loaded into a fresh optimizer over fresh weights, continues
// exactly like the optimizer that never stopped (Muon's momentum, AdamW's moments and step,
// error feedback's previous update).
TEST(Muon, StateRoundTripsThroughCheckpointEntries) {
  TrainConfig train = muon_config();
  train.delay_correction = "error_feedback";
  const Named running = small_stage(11);
  auto optimizer = make_optimizer(running, train, gpt_roles);
  for (int step = 0; step < 2; ++step) {
    apply_gradients(running, step);
    optimizer->step();
  }
  std::vector<TensorEntry> entries;
  for (const auto& [name, tensor] : optimizer_state_tensors(*optimizer, running)) {
    entries.push_back(to_entry(name, tensor));
  }
  Named restored = small_stage(12);  // other values: everything must come from the entries
  for (size_t i = 0; i < restored.size(); ++i) {
    torch::NoGradGuard no_grad;
    restored[i].second.copy_(running[i].second);
  }
  auto resumed = make_optimizer(restored, train, gpt_roles);
  load_optimizer_state(*resumed, restored, entries, "test");
  for (int step = 2; step < 4; ++step) {
    apply_gradients(running, step);
    apply_gradients(restored, step);
    optimizer->step();
    resumed->step();
  }
  for (size_t i = 0; i < running.size(); ++i) {
    EXPECT_TRUE(torch::equal(restored[i].second, running[i].second)) << running[i].first;
  }
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

// pipetrain's AdamW (train/adamw_step.h: ATen's fused kernel) against libtorch's own
// torch::optim::AdamW, the per-parameter loop it replaced, in float64 over 5 steps with weight
// decay: the same update rule, so only rounding differs (kTight); and the state each keeps is
// the same, so a checkpoint of one continues in the other.
TEST(FusedAdamW, StepsEqualLibtorchsAdamWAndKeepItsState) {
  torch::manual_seed(5);
  std::vector<torch::Tensor> start = {torch::randn({7, 5}, torch::kFloat64),
                                      torch::randn({5}, torch::kFloat64)};
  std::vector<torch::Tensor> fused_params, loop_params;
  for (const auto& p : start) {
    fused_params.push_back(p.clone().requires_grad_(true));
    loop_params.push_back(p.clone().requires_grad_(true));
  }
  const auto options = torch::optim::AdamWOptions(1e-2).betas({0.9, 0.99}).eps(1e-8).weight_decay(0.1);
  FusedAdamW fused(fused_params, options);
  torch::optim::AdamW loop(loop_params, options);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < start.size(); ++i) {
      const auto grad = torch::randn_like(start[i]);
      fused_params[i].mutable_grad() = grad.clone();
      loop_params[i].mutable_grad() = grad.clone();
    }
    fused.step();
    loop.step();
  }
  for (size_t i = 0; i < start.size(); ++i) {
    EXPECT_EQ(testing::elementwise_mismatch(fused_params[i], loop_params[i], kTight), "") << i;
    EXPECT_FALSE(torch::equal(fused_params[i], start[i]));  // it moved
    const auto& a = static_cast<torch::optim::AdamWParamState&>(*fused.state().at(fused_params[i].unsafeGetTensorImpl()));
    const auto& b = static_cast<torch::optim::AdamWParamState&>(*loop.state().at(loop_params[i].unsafeGetTensorImpl()));
    EXPECT_EQ(a.step(), 5);
    EXPECT_EQ(a.step(), b.step());
    EXPECT_EQ(testing::elementwise_mismatch(a.exp_avg(), b.exp_avg(), kTight), "");
    EXPECT_EQ(testing::elementwise_mismatch(a.exp_avg_sq(), b.exp_avg_sq(), kTight), "");
  }
}

}  // namespace
}  // namespace pipetrain
