// Weight prediction (PipeOptim, SpecTrain; PipeDream without stashing predicts nothing): every
// action reads the latest weights, extrapolated in place for the actions that predict and
// restored right after.
#include "runtime/weight_policies.h"

namespace pipetrain::runtime {

PredictedWeights::PredictedWeights(int forward_ahead, int backward_ahead, PredictionKind kind,
                                   std::vector<torch::Tensor> params)
    : MasterWeights(std::move(params)),
      forward_ahead_(forward_ahead),
      backward_ahead_(backward_ahead),
      kind_(kind) {}

void PredictedWeights::before_compute(const schedule::Action& action,
                                      torch::optim::Optimizer& optimizer) {
  point_views_at(masters_);
  const int steps = action.kind == schedule::ActionKind::Forward ? forward_ahead_ : backward_ahead_;
  if (steps == 0) return;
  const double lr = current_learning_rate(optimizer);
  for (size_t i = 0; i < masters_.size(); ++i) {
    auto direction = prediction_direction(optimizer, masters_[i], kind_);
    if (!direction.defined()) continue;
    if (saved_original_.empty()) saved_original_.resize(masters_.size());
    saved_original_[i] = masters_[i].variable_data().clone();
    apply_prediction(masters_[i], direction, lr, steps);
  }
  note_peak();
}

void PredictedWeights::after_compute(const schedule::Action&) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < saved_original_.size(); ++i) {
    if (saved_original_[i].defined()) masters_[i].variable_data().copy_(saved_original_[i]);
  }
  saved_original_.clear();
}

void PredictedWeights::before_step() {
  move_gradients_to_masters();
  note_peak();
}

void PredictedWeights::after_step(torch::optim::Optimizer&) {
  finish_update();
  note_peak();
}

int PredictedWeights::live_copies() const {
  return saved_original_.empty() ? 1 : 2;  // the masters, and the original kept aside
}

std::vector<torch::Tensor> PredictedWeights::held_tensors() const {
  std::vector<torch::Tensor> held = MasterWeights::held_tensors();
  held.insert(held.end(), saved_original_.begin(), saved_original_.end());
  return held;
}

}  // namespace pipetrain::runtime
