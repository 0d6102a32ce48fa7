#include "train/adamw_step.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "train/optimizer_state_key.h"

namespace pipetrain {
namespace {

// What one fused call takes: parameters of one device and dtype with their gradients, moments
// and (incremented) step counts.
struct FusedLists {
  std::vector<at::Tensor> params, grads, exp_avgs, exp_avg_sqs;
  std::vector<float> steps;
};

torch::optim::AdamWParamState& state_of(const at::Tensor& p, OptimizerState& state) {
  auto& slot = state[optimizer_state_key(p)];
  if (!slot) {
    auto fresh = std::make_unique<torch::optim::AdamWParamState>();
    fresh->step(0);
    fresh->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
    fresh->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
    slot = std::move(fresh);
  }
  return static_cast<torch::optim::AdamWParamState&>(*slot);
}

}  // namespace

void adamw_step(torch::optim::OptimizerParamGroup& group, OptimizerState& state) {
  torch::NoGradGuard no_grad;
  const auto& options = static_cast<const torch::optim::AdamWOptions&>(group.options());
  if (options.amsgrad()) throw std::logic_error("adamw_step: amsgrad is not supported");
  std::map<std::pair<std::string, at::ScalarType>, FusedLists> by_kind;
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    auto& s = state_of(p, state);
    s.step(s.step() + 1);
    auto& lists = by_kind[{p.device().str(), p.scalar_type()}];
    lists.params.push_back(p);
    lists.grads.push_back(p.grad());
    lists.exp_avgs.push_back(s.exp_avg());
    lists.exp_avg_sqs.push_back(s.exp_avg_sq());
    lists.steps.push_back(float(s.step()));
  }
  const auto [beta1, beta2] = options.betas();
  for (auto& [kind, lists] : by_kind) {
    // The step counts reach the device in one copy; the kernel reads them (float32, as PyTorch's
    // fused AdamW keeps them: exact up to 2^24 steps).
    const auto steps = torch::tensor(lists.steps).to(lists.params.front().device()).unbind(0);
    at::_fused_adamw_(lists.params, lists.grads, lists.exp_avgs, lists.exp_avg_sqs, {}, steps,
                      options.lr(), beta1, beta2, options.weight_decay(), options.eps(),
                      /*amsgrad=*/false, /*maximize=*/false);
  }
}

torch::Tensor FusedAdamW::step(LossClosure closure) {
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) adamw_step(group, state());
  return loss;
}

}  // namespace pipetrain
