#include "train/prediction.h"

#include <cmath>

#include "train/muon.h"
#include "train/optimizer_state_key.h"

namespace pipetrain {
namespace {

template <class State, class Options>
torch::Tensor adam_direction(const State& state, const Options& options, PredictionKind kind) {
  const auto step = double(state.step());
  const double correction1 = 1 - std::pow(std::get<0>(options.betas()), step);
  const double correction2 = 1 - std::pow(std::get<1>(options.betas()), step);
  auto first = state.exp_avg() / correction1;
  if (kind == PredictionKind::MomentumOnly) return first;
  return first / ((state.exp_avg_sq() / correction2).sqrt() + options.eps());
}

}  // namespace

torch::Tensor prediction_direction(torch::optim::Optimizer& optimizer, const torch::Tensor& param,
                                   PredictionKind kind) {
  torch::NoGradGuard no_grad;
  if (auto* muon = dynamic_cast<Muon*>(&optimizer); muon != nullptr && muon->updates_with_muon(param)) {
    return muon->prediction_direction(param, kind == PredictionKind::MomentumOnly);
  }
  auto& states = optimizer.state();
  const auto it = states.find(optimizer_state_key(param));
  if (it == states.end()) return {};
  auto& options = optimizer.param_groups().at(0).options();
  if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(it->second.get())) {
    return adam_direction(*adam, static_cast<torch::optim::AdamOptions&>(options), kind);
  }
  if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(it->second.get())) {
    return adam_direction(*adamw, static_cast<torch::optim::AdamWOptions&>(options), kind);
  }
  if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(it->second.get())) {
    return sgd->momentum_buffer();  // p -= lr * buffer (no Nesterov)
  }
  return {};
}

double current_learning_rate(torch::optim::Optimizer& optimizer) {
  return optimizer.param_groups().at(0).options().get_lr();
}

void apply_prediction(const torch::Tensor& weight, const torch::Tensor& direction, double lr,
                      int steps) {
  if (!direction.defined() || steps == 0) return;
  torch::NoGradGuard no_grad;
  weight.detach().add_(direction, -lr * double(steps));
}

}  // namespace pipetrain
