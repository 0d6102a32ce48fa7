// TeraPipe token slicing at the model level: running a sequence slice by slice (K/V of earlier
// slices cached, backward in reverse handing K/V gradients back) gives the unsliced forward's
// logits and the unsliced backward's gradients.
#include <gtest/gtest.h>

#include <map>

#include "model/gpt.h"

namespace pipetrain {
namespace {

GptConfig small_config() {
  GptConfig config;
  config.layers = 2;
  config.d_model = 32;
  config.heads = 2;
  config.seq_len = 24;
  return config;
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

struct Result {
  torch::Tensor logits;
  double loss = 0;
  std::map<std::string, torch::Tensor> grads;
};

std::map<std::string, torch::Tensor> gradients_of(GptStack& model) {
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : model.named_parameters()) grads[item.key()] = item.value().grad().clone();
  return grads;
}

Result unsliced(const torch::Tensor& tokens, const torch::Tensor& targets) {
  auto model = make_gpt(small_config(), 7);
  auto logits = model->forward(tokens);
  auto loss = lm_loss(logits, targets);
  loss.backward();
  return {logits.detach(), loss.item<double>(), gradients_of(*model)};
}

// Each slice's loss is its share of the sequence mean (tokens in the slice / all tokens).
Result sliced(const torch::Tensor& tokens, const torch::Tensor& targets,
              const std::vector<int64_t>& lengths) {
  auto model = make_gpt(small_config(), 7);
  SequenceKvCache cache;
  std::vector<torch::Tensor> losses, logits;
  int64_t start = 0;
  const double total = double(tokens.size(1));
  for (const int64_t length : lengths) {
    auto out = model->forward_slice(tokens.slice(1, start, start + length), start, cache);
    losses.push_back(lm_loss(out, targets.slice(1, start, start + length)) * (double(length) / total));
    logits.push_back(out.detach());
    start += length;
  }
  double loss = 0;
  for (int s = int(lengths.size()) - 1; s >= 0; --s) {
    std::vector<torch::Tensor> roots = {losses[size_t(s)]}, grads = {torch::ones({})};
    cache.add_backward_roots(s, roots, grads);
    torch::autograd::backward(roots, grads);
    loss += losses[size_t(s)].item<double>();
  }
  return {torch::cat(logits, 1), loss, gradients_of(*model)};
}

class SlicedForward : public ::testing::TestWithParam<std::vector<int64_t>> {};

TEST_P(SlicedForward, EqualsTheUnslicedForwardAndBackward) {
  torch::manual_seed(3);
  const auto tokens = torch::randint(0, 256, {3, 24}, torch::kInt64);
  const auto targets = torch::randint(0, 256, {3, 24}, torch::kInt64);
  const Result want = unsliced(tokens, targets);
  const Result got = sliced(tokens, targets, GetParam());
  EXPECT_LT(relative_difference(got.logits, want.logits), 1e-6);
  EXPECT_NEAR(got.loss, want.loss, 1e-6 * want.loss);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (const auto& [name, grad] : want.grads) {
    if (name.find("qkv.bias") != std::string::npos) {
      // The key bias's true gradient is zero (softmax ignores a shift shared by all keys): only
      // the query and value parts are compared; the key part must stay at rounding level.
      EXPECT_LT(got.grads.at(name).slice(0, 32, 64).abs().max().item<double>(), 1e-6) << name;
      const auto qv = [](const torch::Tensor& t) { return torch::cat({t.slice(0, 0, 32), t.slice(0, 64)}); };
      EXPECT_LT(relative_difference(qv(got.grads.at(name)), qv(grad)), 1e-5) << name;
      continue;
    }
    EXPECT_LT(relative_difference(got.grads.at(name), grad), 1e-5) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Slicings, SlicedForward,
                         ::testing::Values(std::vector<int64_t>{24}, std::vector<int64_t>{12, 12},
                                           std::vector<int64_t>{5, 11, 8},
                                           std::vector<int64_t>{1, 2, 3, 18},
                                           std::vector<int64_t>{16, 4, 2, 1, 1}));

TEST(SlicedForward, RejectsASliceThatSkipsTokens) {
  auto model = make_gpt(small_config(), 7);
  SequenceKvCache cache;
  const auto tokens = torch::zeros({1, 8}, torch::kInt64);
  model->forward_slice(tokens, 0, cache);
  EXPECT_THROW(model->forward_slice(tokens, 12, cache), std::logic_error);
}

}  // namespace
}  // namespace pipetrain
