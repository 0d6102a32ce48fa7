#include "train/error_feedback.h"

namespace pipetrain {

std::vector<torch::Tensor> UpdateMemory::weights_before(
    const std::vector<torch::optim::OptimizerParamGroup>& groups) {
  std::vector<torch::Tensor> before;
  for (const auto& group : groups) {
    for (const auto& p : group.params()) before.push_back(p.detach().clone());
  }
  return before;
}

void UpdateMemory::correct(const std::vector<torch::optim::OptimizerParamGroup>& groups,
                           const std::vector<torch::Tensor>& before) {
  torch::NoGradGuard no_grad;
  size_t index = 0;
  for (const auto& group : groups) {
    for (const auto& p : group.params()) {
      const torch::Tensor& old = before.at(index++);
      if (!p.grad().defined()) continue;  // not updated: nothing to correct
      auto update = old - p.detach();
      const auto key = optimizer_state_key(p);
      auto it = previous_.find(key);
      if (it != previous_.end()) {
        p.detach().sub_(update - it->second);
        it->second = update;
      } else {
        previous_.emplace(key, update);
      }
    }
  }
}

}  // namespace pipetrain
