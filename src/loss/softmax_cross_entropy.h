#pragma once
// Mean cross-entropy of materialised logits, fused: forward keeps the logits themselves (in their
// own dtype, a view of a padded vocabulary included) and two values a row (max, log-sum-exp);
// backward writes their gradient, (softmax - onehot) / N, straight in the logits' dtype. ATen's
// cross_entropy over bfloat16 logits instead widens them to float32, keeps float32
// log-probabilities and builds two float32 gradients: several full [N, V] passes and copies, which
// at GPT-2's vocabulary are most of the head's memory traffic. On a GPU two kernels
// (softmax_cross_entropy.cu); elsewhere ATen operations a block of rows at a time.
#include <cstdint>

#include <ATen/core/Tensor.h>

namespace pipetrain::loss {

// logits [N, V] floating (any row stride), targets [N] integer in [0, V). Returns the mean loss,
// a scalar in float64 for float64 logits and float32 otherwise; differentiable w.r.t. the
// logits. Logits that are the leading V columns of wider contiguous rows (a padded vocabulary
// cut back by a view) are differentiated as those rows: the backward writes the padded gradient,
// zero in the padding, in one pass, and the view's own backward never runs. A target outside
// [0, V) is refused on the host and makes the loss NaN on a GPU (which is not asked to wait for
// a check).
at::Tensor softmax_cross_entropy(const at::Tensor& logits, const at::Tensor& targets);

// Rows the host path widens at once: its transient float32 (or float64) block is about
// 2^20 values; the planner's memory model counts it (model/gpt_model.cpp).
int64_t softmax_cross_entropy_block_rows(int64_t vocab);

}  // namespace pipetrain::loss
