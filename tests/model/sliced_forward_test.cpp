// TeraPipe token slicing at the model level: running a sequence slice by slice (K/V of earlier
// slices cached, backward in reverse handing K/V gradients back) gives the unsliced forward's
// logits and the unsliced backward's gradients: every element, in float64 to 1e-9 relative
// (tests/exactness.h).
#include <gtest/gtest.h>

#include <map>

#include "../tensor_exactness.h"
#include "model/gpt.h"

namespace pipetrain {
namespace {

GptConfig small_config() {
  GptConfig config;
  config.layers = 2;
  config.d_model = 32;
  config.heads = 2;
  config.seq_len = 24;
  config.dtype = torch::kFloat64;
  return config;
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
  ASSERT_EQ(got.logits.scalar_type(), torch::kFloat64);
  EXPECT_EQ(testing::elementwise_mismatch(got.logits, want.logits), "");
  EXPECT_TRUE(testing::exactly_close(got.loss, want.loss)) << got.loss << " vs " << want.loss;
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (const auto& [name, grad] : want.grads) {
    // The key bias's gradient is zero up to rounding (softmax ignores a shift shared by all
    // keys): within the absolute part of the tolerance.
    EXPECT_EQ(testing::elementwise_mismatch(got.grads.at(name), grad), "") << name;
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
