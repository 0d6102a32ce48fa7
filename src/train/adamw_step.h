#pragma once
// The one AdamW step of pipetrain (decoupled weight decay, bias-corrected moments, as
// torch::optim::AdamW), through ATen's fused kernel: one call per parameter group and device
// and dtype instead of ~9 kernels per parameter, which on a GPU is most of a small step's launches.
// The state is torch's AdamWParamState (step, exp_avg, exp_avg_sq), so checkpoints, ZeRO-1, error
// feedback and weight prediction read it as before.
#include <torch/torch.h>

namespace pipetrain {

using OptimizerState = std::remove_reference_t<decltype(std::declval<torch::optim::Optimizer&>().state())>;

// Steps every parameter of `group` that has a gradient; its options are AdamWOptions (amsgrad
// off). Parameters without state get it (step 0, zero moments) first.
void adamw_step(torch::optim::OptimizerParamGroup& group, OptimizerState& state);

// torch::optim::AdamW with its step replaced by adamw_step (same options, same state).
class FusedAdamW : public torch::optim::AdamW {
 public:
  using torch::optim::AdamW::AdamW;
  torch::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace pipetrain
