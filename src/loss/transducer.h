#pragma once
// Transducer (RNN-T) loss, Graves 2012, in log space (see docs/losses.md).
//
// Three entry points:
//  - transducer_loss_and_grad_: one sample's logits [T, U+1, V]; returns the loss and (optionally)
//    overwrites the logits with d(loss)/d(logits) ("function merging": no second buffer).
//  - transducer_loss_batched: the reference; plain libtorch ops over the padded [B, T, U+1, V]
//    logits, differentiable by autograd.
//  - sample_wise_transducer_loss (joint_network.h): the memory-efficient method; the joint
//    output only ever exists for one sample (or a small group) at a time.
#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

namespace pipetrain::loss {

enum class Reduction { Mean, Sum, None };

struct TransducerOptions {
  int64_t blank = 0;                     // index of the blank symbol in the vocabulary
  Reduction reduction = Reduction::Mean; // Mean: average of per-sample losses over the batch
};

// One sample. logits: [T, U+1, V] float, double, bfloat16 or half, on any device (CPU or GPU:
// the V-wide work and the T*U lattice run there; transducer_kernel.cpp), with contiguous
// rows (stride(2) == 1, stride(1) == V; views of a padded tensor are fine). targets: [U] integer
// labels, none blank. Low-precision logits are widened to float32 for everything but the
// gradient written back.
// Returns -log P(targets | logits). When want_grad, logits is overwritten in place with
// grad_scale * d(loss)/d(logits) (log-softmax folded in), so it must not require grad.
double transducer_loss_and_grad_(const at::Tensor& logits, const at::Tensor& targets,
                                 int64_t blank, bool want_grad = true, double grad_scale = 1.0);

// The same for a sample of a batch already checked (check_transducer_batch with the vocabulary,
// and the logits as above): no checks, and nothing read back to the host. labels_on_device: [U]
// int64 on the logits' device. Returns the loss as a 0-dim double tensor there, so that a GPU
// caller waits once a batch, not once a sample.
at::Tensor transducer_loss_and_grad_on_device_(const at::Tensor& logits,
                                               const at::Tensor& labels_on_device, int64_t blank,
                                               bool want_grad, double grad_scale);

// Batched reference. logits [B, T, U+1, V] (padded), targets [B, U] (padding values ignored),
// logit_lengths [B] in 1..T, target_lengths [B] in 0..U. Returns a scalar (Mean/Sum) or the
// per-sample losses [B] (None); gradients through autograd.
at::Tensor transducer_loss_batched(const at::Tensor& logits, const at::Tensor& targets,
                                   const at::Tensor& logit_lengths,
                                   const at::Tensor& target_lengths,
                                   const TransducerOptions& options = {});

// Every entry point's blank check: UserError unless 0 <= blank < vocab_size.
void check_transducer_blank(int64_t blank, int64_t vocab_size);

// Validates a padded batch and returns the lengths as vectors (throws pipetrain::UserError):
// B >= 1 (an empty batch is an error, whatever the reduction), shapes, integer dtypes (not bool),
// lengths in range. vocab_size < 0 skips the blank and label checks (vocabulary not known yet:
// the caller checks again once it is).
struct TransducerLengths {
  std::vector<int64_t> logit_lengths, target_lengths;
};
TransducerLengths check_transducer_batch(int64_t batch, int64_t max_frames, int64_t max_labels,
                                         int64_t vocab_size, const at::Tensor& targets,
                                         const at::Tensor& logit_lengths,
                                         const at::Tensor& target_lengths, int64_t blank);

}  // namespace pipetrain::loss
