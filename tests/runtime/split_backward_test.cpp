// Zero-bubble's split backward: B then W must give exactly the gradients of one full backward,
// B must compute no weight gradient, and W must not push anything down the input path again.
#include <gtest/gtest.h>

#include "runtime/split_backward.h"

namespace pipetrain::runtime {
namespace {

// A residual block with a layer norm, two biased linears, a bias-free linear whose weight is
// used twice along the input path, and a gain used off it: every kind of junction.
struct Block : torch::nn::Module {
  Block() {
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({6})));
    up = register_module("up", torch::nn::Linear(6, 12));
    down = register_module("down", torch::nn::Linear(12, 6));
    twice = register_module("twice", torch::nn::Linear(torch::nn::LinearOptions(6, 6).bias(false)));
    gain = register_parameter("gain", torch::full({6}, 0.5, torch::kFloat64));
  }
  torch::Tensor forward(const torch::Tensor& x, bool weight_twice) {
    auto h = x + down(torch::gelu(up(norm(x))));
    h = twice(h);
    if (weight_twice) h = twice(torch::tanh(h));
    return h * gain;
  }
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear up{nullptr}, down{nullptr}, twice{nullptr};
  torch::Tensor gain;
};

struct Gradients {
  torch::Tensor input;
  std::vector<torch::Tensor> weights;
};

Gradients run(bool split, bool weight_twice, bool check_between = false) {
  torch::manual_seed(7);
  Block block;
  block.to(torch::kFloat64);
  auto input = torch::randn({3, 4, 6}, torch::kFloat64).requires_grad_(true);
  auto output = block.forward(input, weight_twice);
  auto output_grad = torch::randn_like(output);
  if (!split) {
    torch::autograd::backward({output}, {output_grad});
  } else {
    SplitBackward pass({output}, {output_grad}, input, block.parameters());
    if (check_between) {
      for (const auto& p : block.parameters()) EXPECT_FALSE(p.grad().defined()) << "B computed a weight gradient";
      EXPECT_TRUE(input.grad().defined());
      EXPECT_GT(pass.held_gradient_bytes(), 0);
    }
    const auto input_grad_after_b = input.grad().clone();
    pass.weight_pass();
    // W stops at the weights: had it flowed down the input path, input.grad would have doubled.
    EXPECT_TRUE(torch::equal(input.grad(), input_grad_after_b));
  }
  Gradients g{input.grad().clone(), {}};
  for (const auto& p : block.parameters()) g.weights.push_back(p.grad().clone());
  return g;
}

void expect_same(const Gradients& split, const Gradients& full) {
  EXPECT_TRUE(torch::allclose(split.input, full.input, 1e-13, 0));
  ASSERT_EQ(split.weights.size(), full.weights.size());
  for (size_t i = 0; i < full.weights.size(); ++i) {
    EXPECT_TRUE(torch::allclose(split.weights[i], full.weights[i], 1e-13, 1e-15))
        << "weight " << i << ": " << (split.weights[i] - full.weights[i]).abs().max().item<double>();
  }
}

TEST(SplitBackward, InputThenWeightPassEqualsOneBackward) {
  expect_same(run(/*split=*/true, /*weight_twice=*/false, /*check_between=*/true),
              run(/*split=*/false, /*weight_twice=*/false));
}

// A weight used twice along the input path: its lower junction lies below the upper one, and W
// must not feed the upper junction's gradient into the lower one again (it did before W cut the
// junctions' input-path edges: the weight's gradient came out wrong by 2.0).
TEST(SplitBackward, WeightUsedTwiceAlongTheInputPath) {
  expect_same(run(true, true, true), run(false, true));
}

// A first stage: the input (tokens) needs no gradient; B does nothing, W does the whole backward.
TEST(SplitBackward, InputWithoutGradientLeavesEverythingToTheWeightPass) {
  torch::manual_seed(3);
  auto linear = torch::nn::Linear(4, 2);
  linear->to(torch::kFloat64);
  auto input = torch::randn({5, 4}, torch::kFloat64);
  auto output = linear(input);
  SplitBackward pass({output}, {torch::ones_like(output)}, input, linear->parameters());
  EXPECT_FALSE(linear->weight.grad().defined());
  pass.weight_pass();
  EXPECT_TRUE(torch::allclose(linear->weight.grad(), torch::ones({2, 5}, torch::kFloat64).mm(input)));
  EXPECT_TRUE(torch::allclose(linear->bias.grad(), torch::full({2}, 5.0, torch::kFloat64)));
}

}  // namespace
}  // namespace pipetrain::runtime
