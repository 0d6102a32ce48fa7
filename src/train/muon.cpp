#include "train/muon.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "train/adamw_step.h"
#include "train/optimizer_state_key.h"

namespace pipetrain {
namespace {

// sqrt(max(1, rows / cols)): keeps the update's RMS per element independent of the shape.
double shape_scale(const torch::Tensor& param) {
  const double rows = double(param.size(0)), cols = double(param.numel()) / rows;
  return std::sqrt(std::max(1.0, rows / cols));
}

}  // namespace

torch::Tensor newton_schulz_orthogonalize(const torch::Tensor& matrix, int steps) {
  torch::NoGradGuard no_grad;
  auto x = matrix.reshape({matrix.size(0), -1});
  const bool tall = x.size(0) > x.size(1);
  if (tall) x = x.t();
  x = x / (x.norm() + 1e-7);
  for (int i = 0; i < steps; ++i) {
    const auto a = x.mm(x.t());
    const auto b = kNewtonSchulzB * a + kNewtonSchulzC * a.mm(a);
    x = kNewtonSchulzA * x + b.mm(x);
  }
  if (tall) x = x.t();
  return x.reshape(matrix.sizes());
}

Muon::Muon(const std::vector<torch::Tensor>& adamw_params, const torch::optim::AdamWOptions& adamw,
           const std::vector<torch::Tensor>& muon_params, const MuonOptions& muon)
    : torch::optim::Optimizer(std::vector<torch::optim::OptimizerParamGroup>{},
                              std::make_unique<torch::optim::AdamWOptions>(adamw)) {
  add_param_group({adamw_params, std::make_unique<torch::optim::AdamWOptions>(adamw)});
  add_param_group({muon_params, std::make_unique<MuonOptions>(muon)});
}

torch::Tensor Muon::step(LossClosure closure) {
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure != nullptr) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  adamw_step(param_groups_.at(0));
  muon_step(param_groups_.at(1));
  return loss;
}

bool Muon::updates_with_muon(const torch::Tensor& param) const {
  const auto& params = param_groups_.at(1).params();
  return std::any_of(params.begin(), params.end(), [&](const torch::Tensor& p) {
    return p.unsafeGetTensorImpl() == param.unsafeGetTensorImpl();
  });
}

// The AdamW part: pipetrain's one AdamW step (train/adamw_step.h), its state under its own type.
void Muon::adamw_step(torch::optim::OptimizerParamGroup& group) {
  pipetrain::adamw_step(group, state_);
}

void Muon::muon_step(torch::optim::OptimizerParamGroup& group) {
  const auto& options = static_cast<const MuonOptions&>(group.options());
  const double beta = options.momentum(), lr = options.lr() * options.lr_scale();
  for (auto& p : group.params()) {
    if (!p.grad().defined()) continue;
    const auto& grad = p.grad();
    auto& slot = state_[optimizer_state_key(p)];
    if (!slot) {
      auto fresh = std::make_unique<torch::optim::SGDParamState>();
      fresh->momentum_buffer(torch::zeros_like(p));
      slot = std::move(fresh);
    }
    auto& momentum = static_cast<torch::optim::SGDParamState&>(*slot).momentum_buffer();
    momentum.mul_(beta).add_(grad, 1 - beta);
    const auto nesterov = grad * (1 - beta) + momentum * beta;
    const auto update = newton_schulz_orthogonalize(nesterov, int(options.ns_steps()));
    if (options.weight_decay() != 0) p.mul_(1 - lr * options.weight_decay());
    p.add_(update, -lr * shape_scale(p));
  }
}

torch::Tensor Muon::prediction_direction(const torch::Tensor& param, bool momentum_only) {
  torch::NoGradGuard no_grad;
  const auto it = state_.find(optimizer_state_key(param));
  if (it == state_.end()) return {};
  const auto& options = static_cast<const MuonOptions&>(param_groups_.at(1).options());
  const auto& momentum = static_cast<torch::optim::SGDParamState&>(*it->second).momentum_buffer();
  if (momentum_only) return momentum * options.lr_scale();
  return newton_schulz_orthogonalize(momentum, int(options.ns_steps())) *
         (shape_scale(param) * options.lr_scale());
}

}  // namespace pipetrain
