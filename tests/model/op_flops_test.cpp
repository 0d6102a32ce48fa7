// counted_flops: the FLOPs of convolutions and matrix products from their shapes, closed forms
// (2 per multiply-add), nothing for elementwise operators, nothing outside the counted call.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/op_flops.h"

namespace pipetrain {
namespace {

TEST(CountedFlops, ConvolutionsAndMatrixProductsByTheirShapes) {
  torch::manual_seed(0);
  torch::nn::Conv1d conv1d(torch::nn::Conv1dOptions(4, 8, 3).padding(1));
  const auto signal = torch::randn({2, 4, 16});
  // [2, 8, 16] outputs of 4 channels x 3 taps each.
  EXPECT_EQ(counted_flops([&] { conv1d(signal); }), 2.0 * 2 * 8 * 16 * 4 * 3);
  torch::nn::Conv2d grouped(torch::nn::Conv2dOptions(4, 8, 3).groups(2).stride(2));
  const auto image = torch::randn({1, 4, 9, 9});
  // [1, 8, 4, 4] outputs of 2 channels (per group) x 3 x 3.
  EXPECT_EQ(counted_flops([&] { grouped(image); }), 2.0 * 8 * 4 * 4 * 2 * 9);
  torch::nn::Linear linear(16, 4);
  EXPECT_EQ(counted_flops([&] { linear(torch::randn({2, 5, 16})); }), 2.0 * 2 * 5 * 4 * 16);
  const auto a = torch::randn({3, 4, 5}), b = torch::randn({3, 5, 6});
  EXPECT_EQ(counted_flops([&] { torch::bmm(a, b); }), 2.0 * 3 * 4 * 6 * 5);
  EXPECT_EQ(counted_flops([&] { torch::relu(a) + a; }), 0.0);
  EXPECT_EQ(counted_flops([] {}), 0.0);
  linear(torch::randn({2, 16}));  // outside: not counted by the next call
  EXPECT_EQ(counted_flops([&] { torch::mm(a[0], b[0]); }), 2.0 * 4 * 6 * 5);
}

}  // namespace
}  // namespace pipetrain
