// Weight prediction (PipeOptim, SpecTrain; PipeDream without stashing predicts nothing): every
// action reads the latest weights, extrapolated in place for the actions that predict and
// restored right after.
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/weight_policies.h"

namespace pipetrain::runtime {
namespace {

std::vector<torch::Tensor> copies_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.variable_data().clone());
  return out;
}

}  // namespace

PredictedWeights::PredictedWeights(int forward_ahead, int backward_ahead, PredictionKind kind,
                                   std::vector<torch::Tensor> params, std::vector<int> continued_versions)
    : MasterWeights(std::move(params)),
      forward_ahead_(forward_ahead),
      backward_ahead_(backward_ahead),
      kind_(kind),
      continued_versions_(continued_versions.begin(), continued_versions.end()) {}

void PredictedWeights::before_compute(const schedule::Action& action,
                                      torch::optim::Optimizer& optimizer) {
  point_views_at(masters_);
  const bool forward = action.kind == schedule::ActionKind::Forward;
  const auto resumed = resumed_reads_.find(action.version);
  if (forward && resumed != resumed_reads_.end()) {
    write_into_masters(resumed->second);  // what it read before the checkpoint
  } else {
    predict(action, optimizer);
  }
  // The graph keeps reading the masters' storage (the backward sees the live weights), so what
  // a forward ahead of its step read is copied aside.
  if (forward && keep_ahead_reads_ && action.iteration > step_) {
    ahead_reads_[action.version] = copies_of(masters_);
  }
  note_peak();
}

void PredictedWeights::predict(const schedule::Action& action, torch::optim::Optimizer& optimizer) {
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
}

// The masters show `weights` until after_compute restores them.
void PredictedWeights::write_into_masters(const std::vector<torch::Tensor>& weights) {
  torch::NoGradGuard no_grad;
  saved_original_ = copies_of(masters_);
  for (size_t i = 0; i < masters_.size(); ++i) masters_[i].variable_data().copy_(weights[i]);
}

void PredictedWeights::after_compute(const schedule::Action& action) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < saved_original_.size(); ++i) {
    if (saved_original_[i].defined()) masters_[i].variable_data().copy_(saved_original_[i]);
  }
  saved_original_.clear();
  const auto readers = resumed_readers_.find(action.version);
  if (action.kind == schedule::ActionKind::Forward && readers != resumed_readers_.end() &&
      --readers->second == 0) {
    resumed_reads_.erase(action.version);
    resumed_readers_.erase(readers);
  }
}

void PredictedWeights::before_step() {
  move_gradients_to_masters();
  note_peak();
}

void PredictedWeights::after_step(torch::optim::Optimizer& optimizer) {
  finish_update();
  // A version a longer run's next forwards would read: predicted now, as that forward would
  // (same weights, optimizer state and learning rate: no update comes between), for the final
  // checkpoint.
  if (continued_versions_.count(master_version_)) {
    continued_reads_[master_version_] = forward_prediction(optimizer);
  }
  note_peak();
}

// What predict() shows a forward, as a copy: the same additions, so the same bits.
std::vector<torch::Tensor> PredictedWeights::forward_prediction(torch::optim::Optimizer& optimizer) const {
  std::vector<torch::Tensor> copies = copies_of(masters_);
  if (forward_ahead_ == 0) return copies;
  const double lr = current_learning_rate(optimizer);
  for (size_t i = 0; i < masters_.size(); ++i) {
    apply_prediction(copies[i], prediction_direction(optimizer, masters_[i], kind_), lr, forward_ahead_);
  }
  return copies;
}

void PredictedWeights::begin_step(int64_t step, bool checkpoint_may_follow) {
  step_ = step;
  keep_ahead_reads_ = checkpoint_may_follow;
  ahead_reads_.clear();  // the checkpoint between the steps, if any, is written
}

const std::vector<torch::Tensor>& PredictedWeights::stashed(int version) const {
  for (const auto* reads : {&ahead_reads_, &continued_reads_}) {
    const auto found = reads->find(version);
    if (found != reads->end()) return found->second;
  }
  throw std::logic_error(fmt::format("no forward ahead of its step read weight version {}", version));
}

void PredictedWeights::resume(const std::vector<schedule::Action>& ahead, int updates,
                              std::map<int, std::vector<torch::Tensor>> saved) {
  master_version_ = updates;
  resumed_reads_ = std::move(saved);
  resumed_readers_.clear();
  for (const auto& a : ahead) {
    if (a.kind == schedule::ActionKind::Forward && resumed_reads_.count(a.version)) {
      ++resumed_readers_[a.version];
    }
  }
  for (const auto& [version, weights] : resumed_reads_) {
    if (!resumed_readers_.count(version)) {
      throw std::logic_error(fmt::format("resuming after {} updates: no forward reads the "
                                         "checkpointed weight version {}", updates, version));
    }
  }
  point_views_at(masters_);
  note_peak();
}

int PredictedWeights::live_copies() const {
  // The masters, the original kept aside, and the copies a checkpoint would hold.
  return 1 + (saved_original_.empty() ? 0 : 1) +
         int(ahead_reads_.size() + resumed_reads_.size() + continued_reads_.size());
}

std::vector<torch::Tensor> PredictedWeights::held_tensors() const {
  std::vector<torch::Tensor> held = MasterWeights::held_tensors();
  held.insert(held.end(), saved_original_.begin(), saved_original_.end());
  for (const auto* reads : {&ahead_reads_, &resumed_reads_, &continued_reads_}) {
    for (const auto& [version, tensors] : *reads) held.insert(held.end(), tensors.begin(), tensors.end());
  }
  return held;
}

}  // namespace pipetrain::runtime
