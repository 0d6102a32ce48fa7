// model/norm.h: LayerNorm in its input's precision. Float32 and float64 inputs are ATen's
// layer_norm unchanged; a bfloat16 input under mixed precision is normalised in bfloat16 with
// float32 statistics, within one bfloat16 rounding of the float64 norm of the same values, and
// its parameters' gradients come back in float32.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "device/precision.h"
#include "model/norm.h"

namespace pipetrain {
namespace {

torch::nn::LayerNorm norm_of_width(int64_t width) {
  torch::manual_seed(3);
  torch::nn::LayerNorm norm(torch::nn::LayerNormOptions({width}).eps(1e-5));
  torch::NoGradGuard no_grad;
  norm->weight.uniform_(0.5, 1.5);
  norm->bias.uniform_(-0.5, 0.5);
  return norm;
}

TEST(LayerNormHelper, Float32AndFloat64InputsAreTorchsLayerNorm) {
  auto norm = norm_of_width(16);
  const auto x = torch::randn({4, 16}) * 3 + 1;
  EXPECT_TRUE(torch::equal(layer_norm(norm, x), norm->forward(x)));
  norm->to(torch::kFloat64);
  const auto wide = x.to(torch::kFloat64);
  EXPECT_TRUE(torch::equal(layer_norm(norm, wide), norm->forward(wide)));
  // And the formula itself (an oracle besides ATen): (x - mean) / sqrt(biased variance + eps) w + b.
  const auto mean = wide.mean(-1, true), variance = (wide - mean).pow(2).mean(-1, true);
  const auto formula = (wide - mean) / (variance + 1e-5).sqrt() * norm->weight + norm->bias;
  EXPECT_LT((layer_norm(norm, wide) - formula).abs().max().item<double>(), 1e-12);
}

TEST(LayerNormHelper, Bfloat16InputIsNormalisedInBfloat16WithinOneRounding) {
  auto norm = norm_of_width(64);
  const auto x = (torch::randn({32, 64}) * 3 + 1).to(torch::kBFloat16).requires_grad_(true);
  torch::Tensor y;
  {
    device::ComputeScope scope(device::precision_of(device::PrecisionKind::BFloat16Mixed),
                               torch::kCPU);
    y = layer_norm(norm, x);
    // On the CPU this is what autocast did before: its CPU policy leaves layer_norm alone.
    EXPECT_TRUE(torch::equal(y, norm->forward(x)));
  }
  ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
  // The float64 norm of the same bfloat16 values and float32 parameters: the result differs by
  // its own rounding to bfloat16 (half a unit in the last place: 2^-8 relative, as bfloat16
  // keeps 8 significant bits) and by float32 arithmetic's.
  auto wide_norm = norm_of_width(64);
  wide_norm->to(torch::kFloat64);
  const auto x64 = x.detach().to(torch::kFloat64).requires_grad_(true);
  const auto ref = wide_norm->forward(x64);
  const auto error = (y.to(torch::kFloat64) - ref).abs();
  EXPECT_TRUE((error <= ref.abs() * std::ldexp(1.0, -8) + 1e-6).all().item<bool>())
      << "largest error " << error.max().item<double>();
  EXPECT_GT(error.max().item<double>(), 0.0);  // it did round: not a float32 result

  // An upstream gradient that bfloat16 holds exactly, so that y's gradient is not rounded first.
  const auto upstream = torch::randn({32, 64}).to(torch::kBFloat16).to(torch::kFloat64);
  (y.to(torch::kFloat64) * upstream).sum().backward();
  (ref * upstream).sum().backward();
  ASSERT_EQ(norm->weight.grad().scalar_type(), torch::kFloat32);
  ASSERT_EQ(x.grad().scalar_type(), torch::kBFloat16);
  // Each parameter's gradient is a sum over the 32 rows. ATen's CPU kernel accumulates it with
  // bfloat16 roundings (bench/layer_norm_cpu_precision.py: 6.9% off in norm at GPT-2's block
  // shape, 4096 x 768; a GPU's kernel sums in float32 and rounds once, 0.17%), so the bound is
  // recursive summation's in bfloat16: gamma_31 = 31 u / (1 - 31 u) of the sum of the terms'
  // magnitudes, u = 2^-8.
  const auto x_hat = (x64 - x64.mean(-1, true)) *
                     torch::rsqrt(x64.var(-1, /*unbiased=*/false, true) + 1e-5);
  const double gamma_31 = 31 * std::ldexp(1.0, -8) / (1 - 31 * std::ldexp(1.0, -8));
  for (auto [got, want, terms] :
       {std::tuple{norm->weight.grad(), wide_norm->weight.grad(), (upstream * x_hat).abs().sum(0)},
        std::tuple{norm->bias.grad(), wide_norm->bias.grad(), upstream.abs().sum(0)}}) {
    EXPECT_TRUE(((got.to(torch::kFloat64) - want).abs() <= gamma_31 * terms).all().item<bool>());
  }
  const auto input_gap = (x.grad().to(torch::kFloat64) - x64.grad()).abs();
  // Float32 arithmetic, then one rounding to bfloat16.
  EXPECT_TRUE((input_gap <= x64.grad().abs() * std::ldexp(1.0, -8) + 1e-5).all().item<bool>())
      << "largest input-gradient error " << input_gap.max().item<double>();
}

}  // namespace
}  // namespace pipetrain
