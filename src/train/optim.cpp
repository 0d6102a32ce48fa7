#include "train/optim.h"

#include <cmath>

#include "core/error.h"

namespace pipetrain {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const TrainConfig& train) {
  if (train.optimizer == "sgd") {
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(train.lr).momentum(train.momentum).weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adam") {
    return std::make_unique<torch::optim::Adam>(
        params, torch::optim::AdamOptions(train.lr)
                    .betas({train.beta1, train.beta2})
                    .eps(train.eps)
                    .weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adamw") {
    return std::make_unique<torch::optim::AdamW>(
        params, torch::optim::AdamWOptions(train.lr)
                    .betas({train.beta1, train.beta2})
                    .eps(train.eps)
                    .weight_decay(train.weight_decay));
  }
  fail("unknown optimizer '{}' (sgd, adam, adamw)", train.optimizer);
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

double squared_grad_norm(const std::vector<torch::Tensor>& params) {
  double total = 0;
  for (const auto& p : params) {
    if (p.grad().defined()) total += p.grad().to(torch::kFloat64).pow(2).sum().item<double>();
  }
  return total;
}

void scale_grads_to_norm(const std::vector<torch::Tensor>& params, double global_norm,
                         double max_norm) {
  if (max_norm <= 0) return;
  const double coefficient = max_norm / (global_norm + 1e-6);
  if (coefficient >= 1) return;
  torch::NoGradGuard no_grad;
  for (const auto& p : params) {
    if (p.grad().defined()) p.grad().mul_(coefficient);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> optimizer_state_tensors(
    torch::optim::Optimizer& optimizer, torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters()) named.emplace_back(item.key(), item.value());
  return optimizer_state_tensors(optimizer, named);
}

std::vector<std::pair<std::string, torch::Tensor>> optimizer_state_tensors(
    torch::optim::Optimizer& optimizer,
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto& state = optimizer.state();
  for (const auto& [name, tensor] : named) {
    const auto key = c10::guts::to_string(tensor.unsafeGetTensorImpl());
    const auto it = state.find(key);
    if (it == state.end()) continue;
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
      out.emplace_back(name + ".exp_avg", adam->exp_avg());
      out.emplace_back(name + ".exp_avg_sq", adam->exp_avg_sq());
      out.emplace_back(name + ".step", torch::tensor(adam->step(), torch::kInt64));
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
      out.emplace_back(name + ".exp_avg", adamw->exp_avg());
      out.emplace_back(name + ".exp_avg_sq", adamw->exp_avg_sq());
      out.emplace_back(name + ".step", torch::tensor(adamw->step(), torch::kInt64));
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
      out.emplace_back(name + ".momentum_buffer", sgd->momentum_buffer());
    }
  }
  return out;
}

}  // namespace pipetrain
