// bfloat16 logits (a mixed-precision joint's output): the fused kernel widens them to float32
// for the denominators and keeps the lattice in double, so the loss equals the float64 loss of
// the same (bfloat16) values to float32 rounding; only the gradient written back into the
// bfloat16 logits rounds. Its bound: each element is p - t, p = softmax x occupancy and t the
// transition term, both in [0, 1]; p, t and p - t are each rounded to bfloat16 once (relative
// 2^-9), so |error| <= 2^-9 (|p| + |t| + |p - t|) <= 2^-9 * 4 = 2^-7.
#include <gtest/gtest.h>

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include "loss/joint_network.h"
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

// A float16 joint (autocast, as model.dtype = "float16" runs it): the sample-wise loss takes each
// utterance's gradient at its own scale (within [-1, 1]) and applies the mean's 1 / B as it sums
// in float32. So the mean over B copies of one utterance has exactly that utterance's gradients:
// B equal float32 terms of 11 significant bits sum exactly, and 1 / B is a power of two. Taken
// after dividing by B in float16 instead, the gradient's elements below 2^-14 * B would fall into
// float16's subnormals (2^-24 apart) and differ.
TEST(TransducerPrecision, Float16GradientsAreTakenPerUtteranceBeforeTheMean) {
  torch::manual_seed(5);
  const int64_t T = 6, U = 3, J = 8, V = 12, B = 256;
  JointNetwork joint(J, V);
  const auto enc = torch::randn({1, T, J}), pred = torch::randn({1, U + 1, J});
  const auto targets = torch::randint(1, V, {1, U}, torch::kInt64);
  const auto gradients = [&](int64_t copies) {
    joint->zero_grad();
    const auto e = enc.expand({copies, T, J}).clone().to(torch::kHalf).requires_grad_();
    const auto p = pred.expand({copies, U + 1, J}).clone().to(torch::kHalf).requires_grad_();
    at::autocast::set_autocast_dtype(at::kCPU, at::kHalf);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    const auto loss = sample_wise_transducer_loss(joint, e, p, targets.expand({copies, U}),
                                                  torch::full({copies}, T, torch::kInt64),
                                                  torch::full({copies}, U, torch::kInt64), {});
    at::autocast::set_autocast_enabled(at::kCPU, false);
    at::autocast::clear_cache();
    EXPECT_EQ(loss.scalar_type(), torch::kFloat);  // float32 at least, from float16 inputs
    loss.backward();
    std::vector<at::Tensor> grads;  // the joint's (float32); d(enc) is float16's again
    for (const auto& w : joint->parameters()) grads.push_back(w.grad().clone());
    return grads;
  };
  const auto one = gradients(1), mean = gradients(B);
  ASSERT_EQ(one.size(), 2u);  // the output layer's weight and bias
  for (size_t k = 0; k < one.size(); ++k) {
    EXPECT_GT(one[k].abs().max().item<double>(), 0.0);
    EXPECT_TRUE(mean[k].equal(one[k])) << "gradient " << k << ": largest difference "
                                       << (mean[k] - one[k]).abs().max().item<double>();
  }
}

TEST(TransducerPrecision, LogitsOfOtherDtypesAreOneLine) {
  auto logits = torch::zeros({2, 1, 3}, torch::kInt32);
  EXPECT_THROW(transducer_loss_and_grad_(logits, torch::zeros({0}, torch::kInt64), 0), std::exception);
}

}  // namespace
}  // namespace pipetrain::loss
