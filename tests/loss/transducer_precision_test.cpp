// bfloat16 logits (a mixed-precision joint's output): the fused kernel widens them to float32
// for the denominators and keeps the lattice in double, so the loss equals the float64 loss of
// the same (bfloat16) values to float32 rounding; only the gradient written back into the
// bfloat16 logits rounds. Its bound: each element is p - t, p = softmax x occupancy and t the
// transition term, both in [0, 1]; p, t and p - t are each rounded to bfloat16 once (relative
// 2^-9), so |error| <= 2^-9 (|p| + |t| + |p - t|) <= 2^-9 * 4 = 2^-7.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "loss/transducer.h"

namespace pipetrain::loss {
namespace {

TEST(TransducerPrecision, Bfloat16LogitsGiveTheFloat64LossAndAGradientWithinItsRounding) {
  torch::manual_seed(11);
  for (const auto& [T, U, V] : {std::tuple<int64_t, int64_t, int64_t>{7, 3, 5}, {40, 12, 64}, {3, 0, 9}}) {
    const auto logits = (2 * torch::randn({T, U + 1, V})).to(torch::kBFloat16);
    const auto targets = torch::randint(1, V, {U}, torch::kInt64);
    auto reference = logits.to(torch::kFloat64);
    const double expected = transducer_loss_and_grad_(reference, targets, 0);
    auto low = logits.clone();
    const double loss = transducer_loss_and_grad_(low, targets, 0);
    EXPECT_NEAR(loss, expected, 1e-5 * std::abs(expected)) << T << "x" << U << "x" << V;
    EXPECT_EQ(low.scalar_type(), torch::kBFloat16);
    const double worst = (low.to(torch::kFloat64) - reference).abs().max().item<double>();
    EXPECT_LE(worst, 1.0 / 128) << T << "x" << U << "x" << V;
    EXPECT_GT(worst, 0.0);  // it did round: a float64 gradient in disguise would be exact
  }
}

TEST(TransducerPrecision, LogitsOfOtherDtypesAreOneLine) {
  auto logits = torch::zeros({2, 1, 3}, torch::kInt32);
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::zeros({0}, torch::kInt64), 0), std::exception);
}

}  // namespace
}  // namespace pipetrain::loss
