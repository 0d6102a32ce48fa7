// Chunked cross-entropy == plain cross-entropy over the full logits (loss and gradients).
#include <gtest/gtest.h>
#include <torch/torch.h>


#include "core/error.h"
#include "device/host_reads.h"
#include "loss/chunked_cross_entropy.h"

namespace pipetrain::loss {
namespace {

struct Result {
  double loss;
  at::Tensor d_hidden, d_weight;
};

Result plain(const at::Tensor& hidden0, const at::Tensor& weight0, const at::Tensor& targets,
             Reduction reduction) {
  const at::Tensor hidden = hidden0.clone().requires_grad_(), weight = weight0.clone().requires_grad_();
  namespace F = torch::nn::functional;
  auto options = F::CrossEntropyFuncOptions().ignore_index(-100);
  if (reduction == Reduction::Sum) options.reduction(torch::kSum);
  const at::Tensor loss = F::cross_entropy(hidden.mm(weight.t()), targets, options);
  (loss * 1.5).backward();
  return {loss.item<double>(), hidden.grad(), weight.grad()};
}

Result chunked(const at::Tensor& hidden0, const at::Tensor& weight0, const at::Tensor& targets,
               Reduction reduction, int64_t chunk) {
  const at::Tensor hidden = hidden0.clone().requires_grad_(), weight = weight0.clone().requires_grad_();
  const at::Tensor loss = chunked_cross_entropy(hidden, weight, targets, {chunk, -100, reduction});
  (loss * 1.5).backward();
  return {loss.item<double>(), hidden.grad(), weight.grad()};
}

TEST(ChunkedCrossEntropy, EqualsPlainLossAndGradients) {
  torch::manual_seed(0);
  const int64_t N = 37, D = 8, V = 50;
  const at::Tensor hidden = torch::randn({N, D}, torch::kDouble);
  const at::Tensor weight = torch::randn({V, D}, torch::kDouble);
  at::Tensor targets = torch::randint(0, V, {N}, torch::kLong);
  targets[3] = -100;  // ignored tokens (padding)
  targets[20] = -100;
  for (auto reduction : {Reduction::Mean, Reduction::Sum}) {
    const Result ref = plain(hidden, weight, targets, reduction);
    for (int64_t chunk : {1, 5, 16, 37, 1000}) {
      const Result got = chunked(hidden, weight, targets, reduction, chunk);
      EXPECT_NEAR(got.loss, ref.loss, 1e-10 * std::abs(ref.loss)) << chunk;
      EXPECT_TRUE(torch::allclose(got.d_hidden, ref.d_hidden, 1e-9, 1e-12)) << chunk;
      EXPECT_TRUE(torch::allclose(got.d_weight, ref.d_weight, 1e-9, 1e-12)) << chunk;
    }
  }
}

TEST(ChunkedCrossEntropy, FloatMatchesPlainClosely) {
  torch::manual_seed(1);
  const at::Tensor hidden = torch::randn({64, 16}), weight = torch::randn({300, 16}) * 0.3;
  const at::Tensor targets = torch::randint(0, 300, {64}, torch::kLong);
  const Result ref = plain(hidden, weight, targets, Reduction::Mean);
  const Result got = chunked(hidden, weight, targets, Reduction::Mean, 10);
  // float32, unit roundoff u = 6e-8. Both compute the same 16-term logits; the log-sum-exp sums
  // 300 terms, whose rounding errors grow like sqrt(n) u (random signs): sqrt(300) u ~ 1e-6
  // relative on a loss of ~6, so ~6e-6 absolute: 1e-5. The gradients are softmax differences
  // times 300-term products: ~1e-6 relative from the sums plus the lse's ~1e-6: 1e-4 relative
  // keeps a margin of ~50, and 1e-6 absolute covers elements that cancel to ~0 (|grad| ~ 5e-3).
  EXPECT_NEAR(got.loss, ref.loss, 1e-5);
  EXPECT_TRUE(torch::allclose(got.d_hidden, ref.d_hidden, 1e-4, 1e-6));
  EXPECT_TRUE(torch::allclose(got.d_weight, ref.d_weight, 1e-4, 1e-6));
}

TEST(ChunkedCrossEntropy, BadInputsThrowUserError) {
  const at::Tensor h = torch::randn({4, 3}), w = torch::randn({5, 3});
  EXPECT_THROW(chunked_cross_entropy(h, torch::randn({5, 2}), torch::zeros({4}, torch::kLong)), UserError);
  EXPECT_THROW(chunked_cross_entropy(h, w, torch::zeros({3}, torch::kLong)), UserError);
  EXPECT_THROW(chunked_cross_entropy(h, w, torch::full({4}, 5, torch::kLong)), UserError);
  EXPECT_THROW(chunked_cross_entropy(h, w, torch::zeros({4})), UserError);
  EXPECT_THROW(chunked_cross_entropy(h, w, torch::zeros({4}, torch::kLong), {0}), UserError);
}

TEST(ChunkedCrossEntropy, ReadsNoValueOnTheHost) {
  // The forward and the backward read no value on the host, whatever the reduction and however
  // many chunks (device/host_reads.h; the CPU's targets check is marked CPU-only: a GPU skips it).
  torch::manual_seed(2);
  for (auto reduction : {Reduction::Mean, Reduction::Sum}) {
    const at::Tensor hidden = torch::randn({37, 8}, torch::kDouble).requires_grad_();
    const at::Tensor weight = torch::randn({50, 8}, torch::kDouble).requires_grad_();
    at::Tensor targets = torch::randint(0, 50, {37}, torch::kLong);
    targets[3] = -100;
    device::HostReads reads;
    const at::Tensor loss = chunked_cross_entropy(hidden, weight, targets, {5, -100, reduction});
    (loss * 1.5).backward();
    EXPECT_EQ(reads.values(), 0) << reads.describe();
    EXPECT_EQ(reads.value_dependent_shapes(), 0);
    EXPECT_GT(reads.count("aten::mm"), 0);  // the callback does see the loss's operators
  }
}

}  // namespace
}  // namespace pipetrain::loss
