#include "train/optim.h"

#include <cmath>
#include <cstring>

#include <map>

#include <fmt/ranges.h>

#include "core/error.h"
#include "model/state_io.h"

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

namespace {

// The entries (after "<parameter>.") each parameter's state holds once it has been updated.
std::vector<std::string> state_entry_names(const TrainConfig& train) {
  if (train.optimizer == "adam" || train.optimizer == "adamw") return {"exp_avg", "exp_avg_sq", "step"};
  if (train.optimizer == "sgd" && train.momentum != 0) return {"momentum_buffer"};
  return {};
}

void check_step_count(const TensorEntry& step, const std::string& origin) {
  int64_t count = 0;
  const bool one_integer = step.dtype == "I64" && step.bytes.size() == sizeof count;
  if (one_integer) std::memcpy(&count, step.bytes.data(), sizeof count);
  if (!one_integer || count < 1) {
    fail("{}: optimizer state '{}' must be one step count >= 1 (I64), got {} of shape [{}]{}",
         origin, step.name, step.dtype, fmt::join(step.shape, ", "),
         one_integer ? fmt::format(" = {}", count) : "");
  }
}

}  // namespace

void check_optimizer_state_entries(const std::vector<TensorEntry>& weights,
                                   const std::vector<TensorEntry>& state, const TrainConfig& train,
                                   const std::string& origin) {
  std::map<std::string, const TensorEntry*> by_name;
  for (const auto& entry : state) by_name[entry.name] = &entry;
  for (const auto& weight : weights) {
    for (const auto& suffix : state_entry_names(train)) {
      const std::string name = weight.name + "." + suffix;
      const auto it = by_name.find(name);
      if (it == by_name.end()) {
        fail("{}: optimizer state '{}' missing (damaged checkpoint, or another stage's file?)", origin, name);
      }
      const TensorEntry& entry = *it->second;
      if (suffix == "step") {
        check_step_count(entry, origin);
      } else if (entry.shape != weight.shape || entry.dtype != weight.dtype) {
        fail("{}: optimizer state '{}' is {} of shape [{}]; its parameter is {} of shape [{}]",
             origin, name, entry.dtype, fmt::join(entry.shape, ", "), weight.dtype,
             fmt::join(weight.shape, ", "));
      }
    }
  }
}

namespace {

torch::Tensor state_tensor(const std::map<std::string, const TensorEntry*>& by_name,
                           const std::string& name, const torch::Tensor& like,
                           const std::string& origin) {
  const auto it = by_name.find(name);
  if (it == by_name.end()) fail("{}: optimizer state '{}' missing (damaged checkpoint?)", origin, name);
  if (!like.defined()) return from_entry(*it->second);  // a step count
  return from_entry_like(*it->second, like, origin);
}

}  // namespace

void load_optimizer_state(torch::optim::Optimizer& optimizer, torch::nn::Module& module,
                          const std::vector<TensorEntry>& entries, const std::string& origin) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters()) named.emplace_back(item.key(), item.value());
  load_optimizer_state(optimizer, named, entries, origin);
}

void load_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::vector<std::pair<std::string, torch::Tensor>>& named,
                          const std::vector<TensorEntry>& entries, const std::string& origin) {
  std::map<std::string, const TensorEntry*> by_name;
  for (const auto& entry : entries) by_name[entry.name] = &entry;
  const bool is_adam = dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr;
  const bool is_adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  auto& state = optimizer.state();
  for (const auto& [name, p] : named) {
    const auto key = c10::guts::to_string(p.unsafeGetTensorImpl());
    if (is_adam || is_adamw) {
      const auto step = state_tensor(by_name, name + ".step", {}, origin).item<int64_t>();
      const auto avg = state_tensor(by_name, name + ".exp_avg", p, origin);
      const auto avg_sq = state_tensor(by_name, name + ".exp_avg_sq", p, origin);
      if (is_adam) {
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->step(step), s->exp_avg(avg), s->exp_avg_sq(avg_sq);
        state[key] = std::move(s);
      } else {
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(step), s->exp_avg(avg), s->exp_avg_sq(avg_sq);
        state[key] = std::move(s);
      }
    } else if (by_name.count(name + ".momentum_buffer") != 0) {
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(state_tensor(by_name, name + ".momentum_buffer", p, origin));
      state[key] = std::move(s);
    }
  }
}

}  // namespace pipetrain
