// The fused softmax cross-entropy against ATen's cross_entropy (an independent implementation):
// loss and gradient in float64, bfloat16 logits within their rounding, strided views of a padded
// vocabulary, and its refusals. (Its GPU kernels run in bench/gpu_check.sh.)
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "core/error.h"
#include "loss/softmax_cross_entropy.h"

namespace pipetrain::loss {
namespace {

struct Result {
  at::Tensor loss, grad;
};

// Upstream gradient 1.5, so the backward's scaling is checked too.
Result fused(const at::Tensor& logits0, const at::Tensor& targets) {
  const at::Tensor logits = logits0.detach().clone().requires_grad_();
  const at::Tensor loss = softmax_cross_entropy(logits, targets);
  (loss * 1.5).backward();
  return {loss.detach(), logits.grad()};
}

Result reference(const at::Tensor& logits0, const at::Tensor& targets) {
  const at::Tensor logits = logits0.detach().to(at::kDouble).requires_grad_();
  const at::Tensor loss = torch::nn::functional::cross_entropy(logits, targets);
  (loss * 1.5).backward();
  return {loss.detach(), logits.grad()};
}

double max_abs_difference(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(SoftmaxCrossEntropy, EqualsCrossEntropyInFloat64) {
  torch::manual_seed(0);
  // 60 rows of 40000: three of the host path's blocks (26 rows each), the last one short.
  for (const auto& [rows, vocab] : {std::pair<int64_t, int64_t>{60, 40000}, {7, 5}, {1, 1}}) {
    ASSERT_LT(softmax_cross_entropy_block_rows(40000), 60);
    const at::Tensor logits = torch::randn({rows, vocab}, torch::kDouble) * 3;
    const at::Tensor targets = torch::randint(0, vocab, {rows}, torch::kLong);
    const Result got = fused(logits, targets), want = reference(logits, targets);
    EXPECT_EQ(got.loss.scalar_type(), at::kDouble);
    EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(),
                1e-13 * std::abs(want.loss.item<double>()) + 1e-15);
    EXPECT_LT(max_abs_difference(got.grad, want.grad), 1e-15) << rows << " x " << vocab;
  }
}

TEST(SoftmaxCrossEntropy, LargeLogitsDoNotOverflow) {
  const at::Tensor logits =
      torch::tensor({{1000.0, 999.0, -1000.0}, {-800.0, -801.0, -802.0}}, torch::kDouble);
  const at::Tensor targets = torch::tensor({1, 2}, torch::kLong);
  const Result got = fused(logits, targets), want = reference(logits, targets);
  EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-12);
  EXPECT_LT(max_abs_difference(got.grad, want.grad), 1e-15);
}

// Mixed precision's head: bfloat16 logits, a float32 loss, a bfloat16 gradient. The float32
// accumulation is within ~1e-6 of the exact loss of the same bfloat16 values; each gradient
// element, computed in float32 and rounded once, is within one bfloat16 unit (2^-7 relative) of
// the exact gradient.
TEST(SoftmaxCrossEntropy, BFloat16LogitsWithinTheirRounding) {
  torch::manual_seed(1);
  const at::Tensor logits = (torch::randn({64, 3000}) * 4).to(at::kBFloat16);
  const at::Tensor targets = torch::randint(0, 3000, {64}, torch::kLong);
  const Result got = fused(logits, targets), want = reference(logits, targets);
  EXPECT_EQ(got.loss.scalar_type(), at::kFloat);
  EXPECT_EQ(got.grad.scalar_type(), at::kBFloat16);
  EXPECT_NEAR(got.loss.item<double>(), want.loss.item<double>(), 1e-6 * want.loss.item<double>());
  const at::Tensor excess =
      (got.grad.to(at::kDouble) - want.grad).abs() - std::ldexp(1.0, -7) * want.grad.abs();
  EXPECT_LE(excess.max().item<double>(), 1e-30);
}

// GPT-2's mixed head cuts a 64-aligned vocabulary back to the real one: the loss reads the view
// in place, and the padding's columns get zero gradient.
TEST(SoftmaxCrossEntropy, AViewOfAPaddedVocabularyEqualsItsCopy) {
  torch::manual_seed(2);
  const at::Tensor padded = torch::randn({9, 64}, torch::kDouble).requires_grad_();
  const at::Tensor targets = torch::randint(0, 50, {9}, torch::kLong);
  const at::Tensor view = padded.narrow(1, 0, 50);
  (softmax_cross_entropy(view, targets) * 1.5).backward();
  const Result copy = fused(view.detach().contiguous(), targets);
  EXPECT_TRUE(torch::equal(padded.grad().narrow(1, 0, 50), copy.grad));
  EXPECT_EQ(padded.grad().narrow(1, 50, 14).abs().max().item<double>(), 0.0);
  // Columns that are not adjacent (a transposed view) are copied first: same values.
  const at::Tensor columns = torch::randn({50, 9}, torch::kDouble);
  EXPECT_TRUE(torch::equal(fused(columns.t(), targets).grad,
                           fused(columns.t().contiguous(), targets).grad));
}

// The leading columns of a padded vocabulary are differentiated as the padded rows: the
// gradient reaches them without the view's backward (its hook never runs), equal to the copy's
// gradient and zero in the padding. Any other view takes the view's own backward: same values.
TEST(SoftmaxCrossEntropy, APaddedVocabularyIsDifferentiatedAsItsRows) {
  torch::manual_seed(3);
  const at::Tensor targets = torch::randint(0, 50, {6}, torch::kLong);
  for (const int64_t first : {0, 5}) {
    const at::Tensor padded = torch::randn({2, 3, 64}, torch::kDouble).requires_grad_();
    const at::Tensor weight = padded * 1.0;  // a product's output, as the head's
    const at::Tensor view = weight.narrow(2, first, 50).reshape({6, 50});
    int view_gradients = 0;
    view.register_hook([&](const at::Tensor&) { ++view_gradients; });
    (softmax_cross_entropy(view, targets) * 1.5).backward();
    EXPECT_EQ(view_gradients, first == 0 ? 0 : 1) << "first column " << first;
    const Result copy = fused(view.detach().contiguous(), targets);
    const at::Tensor grad = padded.grad().reshape({6, 64});
    EXPECT_TRUE(torch::equal(grad.narrow(1, first, 50), copy.grad)) << "first column " << first;
    EXPECT_EQ(grad.narrow(1, 0, first).abs().sum().item<double>() +
                  grad.narrow(1, first + 50, 14 - first).abs().sum().item<double>(),
              0.0);
  }
}

TEST(SoftmaxCrossEntropy, RefusesWhatIsNotOneRowOfLogitsPerTarget) {
  const at::Tensor logits = torch::zeros({4, 10}), targets = torch::zeros({4}, torch::kLong);
  const auto message = [](const auto& call) {
    try {
      call();
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { softmax_cross_entropy(logits.view({40}), targets); }),
            "softmax cross-entropy: logits must be a floating [N, V] tensor");
  EXPECT_EQ(message([&] { softmax_cross_entropy(logits, torch::zeros({3}, torch::kLong)); }),
            "softmax cross-entropy: targets must be [N] = [4]");
  EXPECT_EQ(message([&] { softmax_cross_entropy(logits, torch::zeros({4})); }),
            "softmax cross-entropy: targets must be integers");
  EXPECT_EQ(message([&] { softmax_cross_entropy(logits, torch::full({4}, 10, torch::kLong)); }),
            "softmax cross-entropy: a target is outside [0, 10)");
  EXPECT_EQ(message([&] { softmax_cross_entropy(logits, torch::full({4}, -100, torch::kLong)); }),
            "softmax cross-entropy: a target is outside [0, 10)");
}

}  // namespace
}  // namespace pipetrain::loss
