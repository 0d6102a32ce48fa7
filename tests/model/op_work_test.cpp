// counted_work: the FLOPs of convolutions and matrix products from their
// shapes (2 per multiply-add), nothing for elementwise operators, nothing outside the counted
// call; and the bytes the memory-bound operators read and write. Closed forms.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/op_work.h"

namespace pipetrain {
namespace {

TEST(CountedFlops, ConvolutionsAndMatrixProductsByTheirShapes) {
  torch::manual_seed(0);
  torch::nn::Conv1d conv1d(torch::nn::Conv1dOptions(4, 8, 3).padding(1));
  const auto signal = torch::randn({2, 4, 16});
  // [2, 8, 16] outputs of 4 channels x 3 taps each.
  EXPECT_EQ(counted_work([&] { conv1d(signal); }).flops, 2.0 * 2 * 8 * 16 * 4 * 3);
  torch::nn::Conv2d grouped(torch::nn::Conv2dOptions(4, 8, 3).groups(2).stride(2));
  const auto image = torch::randn({1, 4, 9, 9});
  // [1, 8, 4, 4] outputs of 2 channels (per group) x 3 x 3.
  EXPECT_EQ(counted_work([&] { grouped(image); }).flops, 2.0 * 8 * 4 * 4 * 2 * 9);
  torch::nn::Linear linear(16, 4);
  EXPECT_EQ(counted_work([&] { linear(torch::randn({2, 5, 16})); }).flops, 2.0 * 2 * 5 * 4 * 16);
  const auto a = torch::randn({3, 4, 5}), b = torch::randn({3, 5, 6});
  EXPECT_EQ(counted_work([&] { torch::bmm(a, b); }).flops, 2.0 * 3 * 4 * 6 * 5);
  EXPECT_EQ(counted_work([&] { torch::relu(a) + a; }).flops, 0.0);
  EXPECT_EQ(counted_work([] {}).flops, 0.0);
  linear(torch::randn({2, 16}));  // outside: not counted by the next call
  EXPECT_EQ(counted_work([&] { torch::mm(a[0], b[0]); }).flops, 2.0 * 4 * 6 * 5);
}

// counted_work's traffic: the bytes each memory-bound operator the host calls reads and writes.
TEST(CountedWork, MemoryBoundOperatorsByTheBytesTheyReadAndWrite) {
  const auto a = torch::randn({3, 4, 5}), b = torch::randn({3, 4, 5});  // 240 bytes each
  auto sum = torch::empty({3, 4, 5});
  // out=: the output is an argument, written (counted as read too: it is an input).
  EXPECT_EQ(counted_work([&] { at::add_out(sum, a, b); }).traffic_bytes, 720.0 + 240.0);
  EXPECT_EQ(counted_work([&] { torch::relu(a) + a; }).traffic_bytes, 480.0 + 720.0);
  auto c = a.clone();
  EXPECT_EQ(counted_work([&] { c.add_(b); }).traffic_bytes, 720.0);  // c and b read, c written
  EXPECT_EQ(counted_work([&] { a.to(torch::kBFloat16); }).traffic_bytes, 240.0 + 120.0);
  // Views move nothing; a copy of a transposed view moves it twice.
  EXPECT_EQ(counted_work([&] { a.transpose(0, 1).reshape({4, 15}); }).traffic_bytes, 480.0);
  EXPECT_EQ(counted_work([&] { a.view({12, 5}).transpose(0, 1); }).traffic_bytes, 0.0);
  EXPECT_EQ(counted_work([&] { torch::empty({100}); }).traffic_bytes, 0.0);
  // A gather reads and writes the rows it returns: [5, 8] floats out of a [100, 8] table.
  const auto table = torch::randn({100, 8}), rows = torch::tensor({1, 5, 7, 7, 99});
  EXPECT_EQ(counted_work([&] { torch::embedding(table, rows); }).traffic_bytes, 2.0 * 5 * 8 * 4);
  // Products are FLOPs, not traffic (nor what they call inside: linear's addmm).
  const auto weight = torch::randn({6, 5}), bias = torch::randn({6});
  const CountedWork product = counted_work([&] { at::linear(a, weight, bias); });
  EXPECT_EQ(product.traffic_bytes, 0.0);
  EXPECT_EQ(product.flops, 2.0 * 12 * 6 * 5);
  // libtorch's nn::Linear adds a 3-dimensional input's bias after the product: [3, 4, 6] floats
  // and the bias read, the sum written.
  torch::nn::Linear module(5, 6);
  EXPECT_EQ(counted_work([&] { module(a); }).traffic_bytes, 288.0 + 24.0 + 288.0);
  // A backward run inside counts its own operators: y = relu(x) sums to a scalar; its backward
  // writes the seed (ones_like: one float) and threshold_backward reads the [60] gradient (the
  // seed expanded, counted by its elements) and x and writes x's gradient.
  const auto x = torch::randn({60}).requires_grad_(true);
  const auto y = torch::relu(x).sum();
  EXPECT_EQ(counted_work([&] { y.backward(); }).traffic_bytes, 4.0 + 240.0 * 3);
}

// counted_work's operators: those the host calls that do work, each a fixed cost on a device.
TEST(CountedWork, OperatorsTheHostCallsThatDoWork) {
  const auto a = torch::randn({3, 4, 5}), b = torch::randn({3, 4, 5});
  auto sum = torch::empty({3, 4, 5});
  EXPECT_EQ(counted_work([&] { at::add_out(sum, a, b); }).operators, 1.0);
  EXPECT_EQ(counted_work([&] { torch::relu(a) + a; }).operators, 2.0);
  EXPECT_EQ(counted_work([&] { a.to(torch::kBFloat16); }).operators, 1.0);  // not its inner copy
  EXPECT_EQ(counted_work([&] { a.transpose(0, 1).reshape({4, 15}); }).operators, 1.0);  // the copy
  EXPECT_EQ(counted_work([&] { a.view({12, 5}).transpose(0, 1); }).operators, 0.0);
  EXPECT_EQ(counted_work([&] { torch::empty({100}); }).operators, 0.0);
  const auto weight = torch::randn({6, 5}), bias = torch::randn({6});
  EXPECT_EQ(counted_work([&] { at::linear(a, weight, bias); }).operators, 1.0);  // a product
  EXPECT_EQ(counted_work([&] { at::linear(a[0], weight, bias).relu_(); }).operators, 2.0);  // a[0]: a view
  // y = relu(x) summed: its backward writes the seed and runs threshold_backward (the sum's
  // backward expands the seed: a view).
  const auto x = torch::randn({60}).requires_grad_(true);
  const auto y = torch::relu(x).sum();
  EXPECT_EQ(counted_work([&] { y.backward(); }).operators, 2.0);
}

}  // namespace
}  // namespace pipetrain
