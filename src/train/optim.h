#pragma once
// Optimizers (libtorch's SGD-momentum, Adam, AdamW; Muon with AdamW, train/muon.h) built from
// the config, with the error-feedback correction (train/error_feedback.h) when
// train.delay_correction asks, and the gradient utilities a pipeline also needs per stage
// (squared norm, so stages can sum before clipping).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "io/safetensors.h"
#include "model/parameter_role.h"

namespace pipetrain {

// The module's parameters with their names, in order.
std::vector<std::pair<std::string, torch::Tensor>> named_tensors(torch::nn::Module& module);

// Every optimizer but Muon (std::logic_error), which needs the parameters' roles.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const TrainConfig& train);
// Any optimizer; Muon orthogonalises the parameters `roles` calls Hidden (the model's answer,
// model/model.h roles_of), AdamW updates the rest.
std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& named, const TrainConfig& train,
    const ParameterRoles& roles);
void set_learning_rate(torch::optim::Optimizer& optimizer, double lr);

double squared_grad_norm(const std::vector<torch::Tensor>& params);
// Scales gradients so their global norm is at most `max_norm` (no-op if max_norm <= 0), given
// the global norm (which a pipeline sums over stages). Same formula as torch's clip_grad_norm_.
void scale_grads_to_norm(const std::vector<torch::Tensor>& params, double global_norm,
                         double max_norm);
// Loss-scaled gradients (train/loss_scale.h) divided by `loss_scale` and clipped as above, in one
// pass; `scaled_norm` is their global norm before the division. scale_grads_to_norm's results
// exactly when loss_scale is 1.
void unscale_and_clip(const std::vector<torch::Tensor>& params, double scaled_norm,
                      double loss_scale, double max_norm);
// The same two without waiting for the device (one process): the global norm as a float64
// scalar on the gradients' device, and the clipping with its coefficient computed there. The
// host reads the norm once the step's work is queued.
torch::Tensor grad_norm_on_device(const std::vector<torch::Tensor>& params);
void clip_grads_to_norm(const std::vector<torch::Tensor>& params, const torch::Tensor& norm,
                        double max_norm);

// Optimizer state as named tensors ("<param name>.<state>") for checkpoints.
std::vector<std::pair<std::string, torch::Tensor>> optimizer_state_tensors(
    torch::optim::Optimizer& optimizer, torch::nn::Module& module);
// The same for named tensors the optimizer owns (a pipeline's master weights).
std::vector<std::pair<std::string, torch::Tensor>> optimizer_state_tensors(
    torch::optim::Optimizer& optimizer,
    const std::vector<std::pair<std::string, torch::Tensor>>& named);

// Checks an optimizer-state file against the weight file of the same stage, before anything
// loads: every weight has each state entry `train`'s optimizer keeps after its first update
// (Adam, AdamW and Muon's AdamW part: exp_avg, exp_avg_sq, step; SGD with momentum and Muon's
// hidden matrices: momentum_buffer; error feedback: previous_update), shaped and typed like
// the weight (a step: one integer >= 1); `roles` says which weights are Muon's matrices. Every
// parameter is updated at every step, so a checkpoint has them all, or, where `may_be_empty`
// (an optimizer that has not stepped: float16 skipped every step so far), none; UserError
// naming `origin` and the entry otherwise.
void check_optimizer_state_entries(const std::vector<TensorEntry>& weights,
                                   const std::vector<TensorEntry>& state, const TrainConfig& train,
                                   const ParameterRoles& roles, const std::string& origin,
                                   bool may_be_empty = false);

// The inverse of optimizer_state_tensors: rebuilds each parameter's state of `module` from
// named entries. UserError on a missing entry or a shape mismatch.
void load_optimizer_state(torch::optim::Optimizer& optimizer, torch::nn::Module& module,
                          const std::vector<TensorEntry>& entries, const std::string& origin);
// The same for named tensors the optimizer owns (a pipeline's master weights).
void load_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::vector<std::pair<std::string, torch::Tensor>>& named,
                          const std::vector<TensorEntry>& entries, const std::string& origin);

}  // namespace pipetrain
