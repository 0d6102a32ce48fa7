#include "train/optim.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <map>

#include <fmt/ranges.h>

#include "core/error.h"
#include "device/reductions.h"
#include "train/adamw_step.h"
#include "model/state_io.h"
#include "train/error_feedback.h"
#include "train/muon.h"
#include "train/optimizer_state_key.h"

namespace pipetrain {

namespace {

// The optimizer `O`, with the error-feedback correction when train.delay_correction asks.
template <class O, class... Args>
std::unique_ptr<torch::optim::Optimizer> build_optimizer(const TrainConfig& train, Args&&... args) {
  if (train.delay_correction == "error_feedback") {
    return std::make_unique<WithErrorFeedback<O>>(std::forward<Args>(args)...);
  }
  return std::make_unique<O>(std::forward<Args>(args)...);
}

torch::optim::AdamWOptions adamw_options(const TrainConfig& train) {
  return torch::optim::AdamWOptions(train.lr)
      .betas({train.beta1, train.beta2})
      .eps(train.eps)
      .weight_decay(train.weight_decay);
}

}  // namespace

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<torch::Tensor>& params,
                                                        const TrainConfig& train) {
  if (train.optimizer == "sgd") {
    return build_optimizer<torch::optim::SGD>(
        train, params,
        torch::optim::SGDOptions(train.lr).momentum(train.momentum).weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adam") {
    return build_optimizer<torch::optim::Adam>(train, params,
                                               torch::optim::AdamOptions(train.lr)
                                                   .betas({train.beta1, train.beta2})
                                                   .eps(train.eps)
                                                   .weight_decay(train.weight_decay));
  }
  if (train.optimizer == "adamw") {
    return build_optimizer<FusedAdamW>(train, params, adamw_options(train));
  }
  if (train.optimizer == "muon") {
    throw std::logic_error("make_optimizer: Muon needs the parameters' names");
  }
  fail("unknown optimizer '{}' (sgd, adam, adamw, muon)", train.optimizer);
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(
    const std::vector<std::pair<std::string, torch::Tensor>>& named, const TrainConfig& train,
    const ParameterRoles& roles) {
  if (train.optimizer != "muon") {
    std::vector<torch::Tensor> params;
    for (const auto& item : named) params.push_back(item.second);
    return make_optimizer(params, train);
  }
  std::vector<torch::Tensor> hidden, others;
  for (const auto& [name, p] : named) {
    (roles(name, p.sizes().vec()) == ParameterRole::Hidden ? hidden : others).push_back(p);
  }
  const auto muon = MuonOptions(train.lr)
                        .lr_scale(train.muon_lr / train.lr)
                        .momentum(train.muon_momentum)
                        .weight_decay(train.weight_decay);
  return build_optimizer<Muon>(train, others, adamw_options(train), hidden, muon);
}

std::vector<std::pair<std::string, torch::Tensor>> named_tensors(torch::nn::Module& module) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters()) named.emplace_back(item.key(), item.value());
  return named;
}

void set_learning_rate(torch::optim::Optimizer& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) group.options().set_lr(lr);
}

namespace {

std::vector<torch::Tensor> defined_grads(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  return grads;
}

}  // namespace

double squared_grad_norm(const std::vector<torch::Tensor>& params) {
  return device::squared_sum(defined_grads(params)).item<double>();
}

torch::Tensor grad_norm_on_device(const std::vector<torch::Tensor>& params) {
  return device::squared_sum(defined_grads(params)).sqrt();  // (none: a CPU zero)
}

void clip_grads_to_norm(const std::vector<torch::Tensor>& params, const torch::Tensor& norm,
                        double max_norm) {
  if (max_norm <= 0) return;
  torch::NoGradGuard no_grad;
  const auto grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, (max_norm / (norm + 1e-6)).clamp_max(1.0));
}

void scale_grads_to_norm(const std::vector<torch::Tensor>& params, double global_norm,
                         double max_norm) {
  if (max_norm <= 0) return;
  const double coefficient = max_norm / (global_norm + 1e-6);
  if (coefficient >= 1) return;
  torch::NoGradGuard no_grad;
  const auto grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, coefficient);
}

void unscale_and_clip(const std::vector<torch::Tensor>& params, double scaled_norm,
                      double loss_scale, double max_norm) {
  if (loss_scale == 1) return scale_grads_to_norm(params, scaled_norm, max_norm);
  const double norm = scaled_norm / loss_scale;
  const double clip = max_norm > 0 ? std::min(1.0, max_norm / (norm + 1e-6)) : 1.0;
  torch::NoGradGuard no_grad;
  const auto grads = defined_grads(params);
  if (!grads.empty()) at::_foreach_mul_(grads, clip / loss_scale);
}

std::vector<std::pair<std::string, torch::Tensor>> optimizer_state_tensors(
    torch::optim::Optimizer& optimizer, torch::nn::Module& module) {
  return optimizer_state_tensors(optimizer, named_tensors(module));
}

std::vector<std::pair<std::string, torch::Tensor>> optimizer_state_tensors(
    torch::optim::Optimizer& optimizer,
    const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  auto& state = optimizer.state();
  auto* memory = dynamic_cast<UpdateMemory*>(&optimizer);
  for (const auto& [name, tensor] : named) {
    const auto key = optimizer_state_key(tensor);
    if (memory != nullptr && memory->previous_updates().count(key) != 0) {
      out.emplace_back(name + ".previous_update", memory->previous_updates().at(key));
    }
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

// The entries (after "<parameter>.") the state of `parameter` holds once it has been updated.
std::vector<std::string> state_entry_names(const TrainConfig& train, const TensorEntry& weight,
                                           const ParameterRoles& roles) {
  std::vector<std::string> names;
  const bool muon_matrix =
      train.optimizer == "muon" && roles(weight.name, weight.shape) == ParameterRole::Hidden;
  if (muon_matrix || (train.optimizer == "sgd" && train.momentum != 0)) {
    names = {"momentum_buffer"};
  } else if (train.optimizer != "sgd") {
    names = {"exp_avg", "exp_avg_sq", "step"};
  }
  if (train.delay_correction == "error_feedback") names.push_back("previous_update");
  return names;
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
                                   const ParameterRoles& roles, const std::string& origin,
                                   bool may_be_empty) {
  if (may_be_empty && state.empty()) return;  // an optimizer that has not stepped yet
  std::map<std::string, const TensorEntry*> by_name;
  for (const auto& entry : state) by_name[entry.name] = &entry;
  for (const auto& weight : weights) {
    if (roles(weight.name, weight.shape) == ParameterRole::State) continue;  // a buffer: no optimizer state
    for (const auto& suffix : state_entry_names(train, weight, roles)) {
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
  load_optimizer_state(optimizer, named_tensors(module), entries, origin);
}

namespace {

enum class StateKind { Adam, AdamW, Momentum };

// The state type `optimizer` keeps for `p` (a Muon's hidden matrices keep a momentum).
StateKind state_kind(torch::optim::Optimizer& optimizer, const torch::Tensor& p) {
  if (auto* muon = dynamic_cast<Muon*>(&optimizer)) {
    return muon->updates_with_muon(p) ? StateKind::Momentum : StateKind::AdamW;
  }
  if (dynamic_cast<torch::optim::Adam*>(&optimizer) != nullptr) return StateKind::Adam;
  if (dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr) return StateKind::AdamW;
  return StateKind::Momentum;
}

template <class State>
std::unique_ptr<State> adam_state(const std::map<std::string, const TensorEntry*>& by_name,
                                  const std::string& name, const torch::Tensor& p,
                                  const std::string& origin) {
  auto s = std::make_unique<State>();
  s->step(state_tensor(by_name, name + ".step", {}, origin).item<int64_t>());
  s->exp_avg(state_tensor(by_name, name + ".exp_avg", p, origin));
  s->exp_avg_sq(state_tensor(by_name, name + ".exp_avg_sq", p, origin));
  return s;
}

}  // namespace

void load_optimizer_state(torch::optim::Optimizer& optimizer,
                          const std::vector<std::pair<std::string, torch::Tensor>>& named,
                          const std::vector<TensorEntry>& entries, const std::string& origin) {
  // No entries at all, which the checkpoint's check let through only for an optimizer that had
  // not stepped (float16 skipped every step so far): it resumes fresh, as it was.
  if (entries.empty()) return;
  std::map<std::string, const TensorEntry*> by_name;
  for (const auto& entry : entries) by_name[entry.name] = &entry;
  auto& state = optimizer.state();
  auto* memory = dynamic_cast<UpdateMemory*>(&optimizer);
  for (const auto& [name, p] : named) {
    const auto key = optimizer_state_key(p);
    if (memory != nullptr) {
      memory->previous_updates()[key] = state_tensor(by_name, name + ".previous_update", p, origin);
    }
    switch (state_kind(optimizer, p)) {
      case StateKind::Adam:
        state[key] = adam_state<torch::optim::AdamParamState>(by_name, name, p, origin);
        break;
      case StateKind::AdamW:
        state[key] = adam_state<torch::optim::AdamWParamState>(by_name, name, p, origin);
        break;
      case StateKind::Momentum:
        if (by_name.count(name + ".momentum_buffer") == 0) break;  // SGD without momentum
        auto s = std::make_unique<torch::optim::SGDParamState>();
        s->momentum_buffer(state_tensor(by_name, name + ".momentum_buffer", p, origin));
        state[key] = std::move(s);
        break;
    }
  }
}

}  // namespace pipetrain
