#pragma once
// The error-feedback correction for one-step-delayed gradients (arXiv 2606.30634, as
// REFERENCE.md section 8 summarises it; docs/weight-policies.md): after the optimizer's own
// update u(t) = W_before - W_after (weight decay included), the weights move on by its change
// since the previous update,
//   W(t+1) = W(t) - u(t) - (u(t) - u(t-1)),
// no correction at a parameter's first update. State: u(t-1), one weight-sized buffer per
// parameter (checkpoint entry "<parameter>.previous_update"). It lives inside the optimizer, so
// the trainer, the pipeline and AsyncReference apply it alike under every schedule.
#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "train/optimizer_state_key.h"

namespace pipetrain {

// The correction's state and rule, for any optimizer's parameter groups.
class UpdateMemory {
 public:
  virtual ~UpdateMemory() = default;
  // u(t-1) by parameter (TensorImpl key, as torch keys optimizer state); empty before a step.
  std::map<OptimizerStateKey, torch::Tensor>& previous_updates() { return previous_; }

 protected:
  static std::vector<torch::Tensor> weights_before(
      const std::vector<torch::optim::OptimizerParamGroup>& groups);
  void correct(const std::vector<torch::optim::OptimizerParamGroup>& groups,
               const std::vector<torch::Tensor>& before);

 private:
  std::map<OptimizerStateKey, torch::Tensor> previous_;
};

template <class Base>
class WithErrorFeedback : public Base, public UpdateMemory {
 public:
  using Base::Base;
  torch::Tensor step(torch::optim::Optimizer::LossClosure closure = nullptr) override {
    const auto before = weights_before(this->param_groups());
    auto loss = Base::step(std::move(closure));
    correct(this->param_groups(), before);
    return loss;
  }
};

}  // namespace pipetrain
