#pragma once
// The transducer joint network and the sample-wise (memory-efficient) transducer loss.
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "loss/transducer.h"

namespace pipetrain::loss {

// hidden[b, t, u, :] = tanh(enc[b, t, :] + pred[b, u, :]): enc [B, T, J], pred [B, U+1, J] ->
// [B, T, U+1, J], differentiable (the joint network's first half).
at::Tensor joint_hidden(const at::Tensor& enc, const at::Tensor& pred);

// logits[b, t, u, :] = Linear(J, V)(tanh(enc[b, t, :] + pred[b, u, :])).
// The encoder and predictor project into the joint dimension J themselves.
class JointNetworkImpl : public torch::nn::Module {
 public:
  JointNetworkImpl(int64_t joint_dim, int64_t vocab_size);
  // enc [B, T, J], pred [B, U+1, J] -> logits [B, T, U+1, V].
  at::Tensor forward(const at::Tensor& enc, const at::Tensor& pred);
  int64_t vocab_size() const { return output->options.out_features(); }

  torch::nn::Linear output{nullptr};
};
TORCH_MODULE(JointNetwork);

// Any joint: (enc [G, T, J], pred [G, U+1, J]) -> logits [G, T, U+1, V]. Its last operation must
// not save its own output for backward (true of Linear): the gradient overwrites that buffer.
// Nor should the logits be an autograd view (at::linear's reshape of a 4-D input is one): a view
// overwritten in place replays itself in the backward, a zero-filled copy of all the logits.
using JointFunction = std::function<at::Tensor(const at::Tensor& enc, const at::Tensor& pred)>;

struct SampleWiseOptions {
  int64_t blank = 0;
  Reduction reduction = Reduction::Mean;  // Mean or Sum (None is not supported: see below)
  // Joint activations allowed at once. 0: one sample at a time (least memory). Otherwise
  // samples, sorted by T*(U+1), are grouped while the padded group's estimated footprint,
  // positions * (2V * logit size + 4J * input size), stays within the budget.
  int64_t memory_budget_bytes = 0;
  std::function<void(int64_t samples_done, int64_t samples_total)> on_progress;
};

// Sample-wise transducer loss (Braun et al. 2022). enc [B, T, J] and pred [B, U+1, J] are the
// encoder and predictor outputs of the batch; targets [B, U]; lengths [B].
//
// Contract: the forward pass does all the work. Per sample (or group) it runs the joint, the
// fused loss + gradient in place over the logits, and the backward through the joint; it keeps
// d(enc), d(pred) and the joint parameters' gradients, and frees the sample's activations.
// The returned scalar is an autograd node over (enc, pred, joint_params): loss.backward()
// hands the kept gradients (times the incoming gradient) to enc/pred, so the encoder and
// predictor run one batched backward, and the joint parameters' .grad accumulates as usual.
// The kept gradients are released by that backward (it can run once: no retain_graph).
// Without grad mode, or when nothing requires grad, only the loss is computed.
at::Tensor sample_wise_transducer_loss(const JointFunction& joint,
                                       const std::vector<at::Tensor>& joint_params,
                                       const at::Tensor& enc, const at::Tensor& pred,
                                       const at::Tensor& targets, const at::Tensor& logit_lengths,
                                       const at::Tensor& target_lengths,
                                       const SampleWiseOptions& options = {});

at::Tensor sample_wise_transducer_loss(JointNetwork& joint, const at::Tensor& enc,
                                       const at::Tensor& pred, const at::Tensor& targets,
                                       const at::Tensor& logit_lengths,
                                       const at::Tensor& target_lengths,
                                       const SampleWiseOptions& options = {});

}  // namespace pipetrain::loss
