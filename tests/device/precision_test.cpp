// What a precision does to tensors (device/precision.h): layers in a ComputeScope compute in
// bfloat16 under mixed precision and exactly as before otherwise; at_boundary rounds what leaves
// a layer to bfloat16 and sends its gradient back in the weights' float32.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "device/precision.h"

namespace pipetrain::device {
namespace {

const Precision kMixed = precision_of(PrecisionKind::BFloat16Mixed);

TEST(Precision, MixedKeepsFloat32WeightsAndSendsBfloat16) {
  EXPECT_EQ(kMixed.parameter_dtype(), torch::kFloat32);
  EXPECT_EQ(kMixed.activation_dtype(), torch::kBFloat16);
  EXPECT_EQ(precision_of(PrecisionKind::Float64).activation_dtype(), torch::kFloat64);
  EXPECT_FALSE(precision_of(PrecisionKind::Float32).mixed());
}

TEST(Precision, ComputeScopeRunsMatrixProductsInBfloat16AndEndsWithTheScope) {
  torch::manual_seed(0);
  const auto a = torch::randn({8, 8}), b = torch::randn({8, 8});
  {
    ComputeScope scope(kMixed, torch::kCPU);
    const auto product = torch::mm(a, b);
    EXPECT_EQ(product.scalar_type(), torch::kBFloat16);
    // Autocast rounds the operands to bfloat16, then multiplies: the same as doing so by hand.
    EXPECT_TRUE(torch::equal(product, torch::mm(a.to(torch::kBFloat16), b.to(torch::kBFloat16))));
    {
      ComputeScope nested(kMixed, torch::kCPU);
      EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    }
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);  // the inner scope kept it on
  }
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat32);
  ComputeScope full(precision_of(PrecisionKind::Float64), torch::kCPU);
  EXPECT_EQ(torch::mm(a.to(torch::kFloat64), b.to(torch::kFloat64)).scalar_type(), torch::kFloat64);
}

TEST(Precision, AtBoundaryRoundsToBfloat16AndItsGradientComesBackInFloat32) {
  const auto x = torch::tensor({1.0f + 1.0f / 1024, 3.14159f, -2.0f}).requires_grad_(true);
  const auto sent = at_boundary(x, kMixed);
  EXPECT_EQ(sent.scalar_type(), torch::kBFloat16);
  // bfloat16 keeps 8 significant bits: 1 + 2^-10 rounds to 1, pi to 3.140625, -2 stays.
  EXPECT_EQ(sent.to(torch::kFloat64)[0].item<double>(), 1.0);
  EXPECT_EQ(sent.to(torch::kFloat64)[1].item<double>(), 3.140625);
  EXPECT_EQ(sent.to(torch::kFloat64)[2].item<double>(), -2.0);
  (sent.to(torch::kFloat32) * torch::tensor({1.0f, 2.0f, 3.0f})).sum().backward();
  EXPECT_EQ(x.grad().scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({1.0f, 2.0f, 3.0f})));
  const auto tokens = torch::tensor({1, 2}, torch::kInt64);
  EXPECT_TRUE(at_boundary(tokens, kMixed).is_same(tokens));  // ids are not activations
  EXPECT_TRUE(at_boundary(x, precision_of(PrecisionKind::Float32)).is_same(x));
  EXPECT_EQ(at_least_float32(sent).scalar_type(), torch::kFloat32);
}

// ATen's CPU layer_norm takes bfloat16 input with float32 parameters; its CUDA kernel takes one
// dtype. A meta tensor stands in for the GPU's input: only its device and dtype are read.
TEST(Precision, NormParametersStayAsTheyAreOnTheCpuAndTakeTheInputsDtypeElsewhere) {
  const auto weight = torch::ones({4});
  const auto on_cpu = torch::ones({2, 4}, torch::kBFloat16);
  EXPECT_TRUE(norm_parameter(weight, on_cpu).is_same(weight));
  const auto elsewhere = torch::empty({2, 4}, torch::dtype(torch::kBFloat16).device(torch::kMeta));
  EXPECT_EQ(norm_parameter(weight, elsewhere).scalar_type(), torch::kBFloat16);
  EXPECT_FALSE(norm_parameter(torch::Tensor(), elsewhere).defined());
}

}  // namespace
}  // namespace pipetrain::device
