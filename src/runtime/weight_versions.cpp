#include "runtime/weight_versions.h"

#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "train/prediction.h"

namespace pipetrain::runtime {
namespace {

using schedule::ActionKind;
using schedule::WeightPolicyKind;

std::vector<torch::Tensor> aliases_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.variable_data());  // same storage, own counter
  return out;
}

std::vector<torch::Tensor> copies_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.variable_data().clone());
  return out;
}

PredictionKind prediction_kind(const schedule::WeightPolicy& policy) {
  // SpecTrain (the only policy that also predicts its backward) extrapolates with momentum only.
  return policy.predict_backward ? PredictionKind::MomentumOnly : PredictionKind::OptimizerUpdate;
}

}  // namespace

WeightVersions::WeightVersions(const schedule::Schedule& schedule, int worker, int stage,
                               std::vector<torch::Tensor> params)
    : policy_(schedule.policy), stage_(stage), views_(std::move(params)) {
  for (const auto& p : views_) masters_.push_back(p.variable_data().requires_grad_(true));
  if (!stashing()) return;
  count_readers(schedule.actions.at(size_t(worker)), schedule.iterations);
  if (readers_left_.count(0)) versions_[0] = aliases_of(masters_);
}

std::vector<int> checkpointed_versions(const schedule::WeightPolicy& policy, int updates) {
  if (policy.kind != WeightPolicyKind::DoubleBuffer || updates == 0) return {};
  if (policy.predict_ahead > 0) return {updates, updates - 1};
  return {updates - 1};
}

void WeightVersions::count_readers(const std::vector<schedule::Action>& actions, int iterations) {
  readers_left_.clear();
  for (const auto& a : actions) {
    if (schedule::is_compute(a.kind)) ++readers_left_[a.version];
  }
  // The final checkpoint continues too (with more train.steps): keep the versions that groups
  // `iterations` and `iterations` + 1 would read, never released (at most the 2 copies of 2BW).
  if (policy_.kind == WeightPolicyKind::DoubleBuffer) {
    ++readers_left_[iterations - 1];
    ++readers_left_[iterations];
  }
}

bool WeightVersions::aliases_masters(int version) const {
  // after_step: plain 2BW aliases the new version to the masters; 2bw-predict stores a copy.
  return version == master_version_ && policy_.predict_ahead == 0;
}

const std::vector<torch::Tensor>& WeightVersions::stashed(int version) const {
  const auto it = versions_.find(version);
  if (it == versions_.end() || aliases_masters(version)) {
    throw std::logic_error(fmt::format("stage {}: no stashed weight version {} to checkpoint",
                                       stage_, version));
  }
  return it->second;
}

void WeightVersions::resume(const std::vector<schedule::Action>& remaining, int iterations,
                            int updates, std::map<int, std::vector<torch::Tensor>> saved) {
  master_version_ = updates;
  count_readers(remaining, iterations);
  versions_.clear();
  for (const auto& entry : readers_left_) {
    const int version = entry.first;
    if (version > master_version_) break;  // made by a later update
    if (aliases_masters(version)) {
      versions_[version] = aliases_of(masters_);
    } else if (saved.count(version) != 0) {
      versions_[version] = std::move(saved.at(version));
    } else {
      throw std::logic_error(fmt::format("stage {}: resuming after {} updates needs weight "
                                         "version {}, which the checkpoint lacks", stage_,
                                         updates, version));
    }
  }
  point_views_at(masters_);
  note_peak();
}

bool WeightVersions::stashing() const {
  return policy_.kind == WeightPolicyKind::DoubleBuffer || policy_.kind == WeightPolicyKind::Stash;
}

void WeightVersions::point_views_at(const std::vector<torch::Tensor>& tensors) {
  for (size_t i = 0; i < views_.size(); ++i) views_[i].set_data(tensors[i]);
}

void WeightVersions::before_compute(const schedule::Action& action,
                                    torch::optim::Optimizer& optimizer) {
  if (stashing()) return point_views_at(versions_.at(action.version));
  const auto& staleness = action.kind == ActionKind::Forward ? policy_.forward_staleness
                                                             : policy_.backward_staleness;
  const bool predicts = action.kind == ActionKind::Forward || policy_.predict_backward;
  point_views_at(masters_);
  if (predicts && !staleness.empty()) predict_in_master(staleness.at(size_t(stage_)), optimizer);
}

void WeightVersions::predict_in_master(int steps, torch::optim::Optimizer& optimizer) {
  if (steps == 0) return;
  const double lr = current_learning_rate(optimizer);
  for (const auto& m : masters_) {
    auto direction = prediction_direction(optimizer, m, prediction_kind(policy_));
    if (!direction.defined()) continue;
    if (saved_original_.empty()) saved_original_.resize(masters_.size());
    saved_original_[size_t(&m - masters_.data())] = m.variable_data().clone();
    apply_prediction(m, direction, lr, steps);
  }
  note_peak();
}

void WeightVersions::after_compute(const schedule::Action& action) {
  if (!stashing()) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < saved_original_.size(); ++i) {
      if (saved_original_[i].defined()) masters_[i].variable_data().copy_(saved_original_[i]);
    }
    saved_original_.clear();
    return;
  }
  if (--readers_left_.at(action.version) == 0) {
    versions_.erase(action.version);
    point_views_at(masters_);  // the views must not keep a dropped version alive
  }
}

void WeightVersions::before_step() {
  for (size_t i = 0; i < views_.size(); ++i) {
    masters_[i].mutable_grad() = views_[i].grad();
    views_[i].mutable_grad() = torch::Tensor();
  }
  // Copy on write: the step updates the master in place, but a version may share its storage.
  const auto shared = versions_.find(master_version_);
  if (shared != versions_.end() && shared->second.front().data_ptr() == masters_.front().data_ptr()) {
    for (auto& m : masters_) m.set_data(m.variable_data().clone());
  }
  note_peak();
}

void WeightVersions::after_step(torch::optim::Optimizer& optimizer) {
  for (auto& m : masters_) m.mutable_grad() = torch::Tensor();
  ++master_version_;
  if (stashing() && readers_left_.count(master_version_)) {
    if (policy_.predict_ahead == 0) {
      versions_[master_version_] = aliases_of(masters_);
    } else {
      auto predicted = copies_of(masters_);
      const double lr = current_learning_rate(optimizer);
      for (size_t i = 0; i < predicted.size(); ++i) {
        apply_prediction(predicted[i],
                         prediction_direction(optimizer, masters_[i], PredictionKind::OptimizerUpdate),
                         lr, policy_.predict_ahead);
      }
      versions_[master_version_] = predicted;
    }
  }
  note_peak();
}

void WeightVersions::point_at_latest() { point_views_at(masters_); }

std::vector<torch::Tensor> WeightVersions::held_tensors() const {
  std::vector<torch::Tensor> held = views_;
  held.insert(held.end(), masters_.begin(), masters_.end());
  for (const auto& [version, tensors] : versions_) held.insert(held.end(), tensors.begin(), tensors.end());
  held.insert(held.end(), saved_original_.begin(), saved_original_.end());
  return held;
}

int WeightVersions::live_copies() const {
  std::set<const void*> storages{masters_.front().data_ptr()};
  for (const auto& [version, tensors] : versions_) storages.insert(tensors.front().data_ptr());
  if (!saved_original_.empty()) storages.insert(nullptr);  // the original kept aside
  return int(storages.size());
}

void WeightVersions::note_peak() { peak_copies_ = std::max(peak_copies_, live_copies()); }

}  // namespace pipetrain::runtime
