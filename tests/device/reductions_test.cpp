#include "device/reductions.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace pipetrain::device {
namespace {

double float64_squared_sum(const std::vector<torch::Tensor>& tensors) {
  double sum = 0;
  for (const auto& t : tensors) sum += t.to(torch::kFloat64).square().sum().item<double>();
  return sum;
}

// Float64 tensors are read as they are: the foreach kernel's sum, to float64 rounding.
TEST(SquaredSum, Float64TensorsGiveTheirSumOfSquares) {
  torch::manual_seed(1);
  const std::vector<torch::Tensor> tensors{torch::randn({7, 5}, torch::kFloat64),
                                           torch::randn({3}, torch::kFloat64)};
  const torch::Tensor sum = squared_sum(tensors);
  EXPECT_EQ(sum.dim(), 0);
  EXPECT_EQ(sum.scalar_type(), torch::kFloat64);
  const double want = float64_squared_sum(tensors);
  EXPECT_NEAR(sum.item<double>(), want, 1e-14 * want);
}

// Float32 tensors of whole rows and of a tail (4096 * 300 + 1234 values; a 17-value one; an
// empty one), beside a float64 one. Each row is a float32 norm whose sum of 4096 squares rounds
// at most 4096 u (u = 2^-24) in the worst case; random signs make the errors cancel, and the
// float64 sum of the rows adds nothing measurable: within 1e-6 of the float64 reference, where
// one float32 norm of all the values drifts (0.4% at GPT-2's 38.6M-value embedding).
TEST(SquaredSum, Float32RowsAndTailsAreWithinFloat32RoundingOfFloat64) {
  torch::manual_seed(2);
  const std::vector<torch::Tensor> tensors{
      torch::randn({300 * kSquaredSumRow + 1234}), torch::randn({17}), torch::zeros({0}),
      torch::randn({64, 3}, torch::kFloat64)};
  const double want = float64_squared_sum(tensors);
  const double got = squared_sum(tensors).item<double>();
  EXPECT_NEAR(got, want, 1e-6 * want);
  EXPECT_NE(got, want);  // the float32 rows did round: not the float64 path
}

// Each part lands once: a tensor of exactly one row, rows with a tail, and a non-contiguous view
// (transposed; read through a contiguous copy), each against its closed form. The values make
// every partial norm an exact float32 (128, 4, 5), so the sums are exact.
TEST(SquaredSum, ExactRowsTailsAndViewsCountEachValueOnce) {
  EXPECT_EQ(squared_sum({torch::full({kSquaredSumRow}, 0.5)}).item<double>(), 1024.0);
  EXPECT_EQ(squared_sum({torch::full({kSquaredSumRow + 4}, 2.0)}).item<double>(), 16400.0);
  const torch::Tensor matrix = torch::tensor({1.0F, 2.0F, 4.0F, 2.0F}).view({2, 2});
  EXPECT_EQ(squared_sum({matrix.t()}).item<double>(), 25.0);
  EXPECT_EQ(squared_sum({}).item<double>(), 0.0);
}

}  // namespace
}  // namespace pipetrain::device
