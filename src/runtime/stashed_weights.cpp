// Weight stashing (PipeDream-2BW, 2bw-predict, PipeDream): each compute action reads the version
// its schedule names, kept as an immutable storage until its last reader is done.
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "runtime/weight_policies.h"

namespace pipetrain::runtime {
namespace {

std::vector<torch::Tensor> aliases_of(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.variable_data());  // same storage, own counter
  return out;
}

}  // namespace

StashedWeights::StashedWeights(int iterations, int stage, Options options,
                               std::vector<torch::Tensor> params)
    : MasterWeights(std::move(params)), options_(options), iterations_(iterations), stage_(stage) {
  count_final_readers();
  count_readers({});
}

// The final checkpoint continues too (with more train.steps): 2BW keeps the versions that groups
// `iterations` and `iterations` + 1 would read (at most its 2 copies), PipeDream the
// `continued_versions`; never read, never released.
void StashedWeights::count_final_readers() {
  if (options_.keep_final_versions) {
    ++readers_left_[iterations_ - 1];
    ++readers_left_[iterations_];
  }
  for (const int version : options_.continued_versions) ++readers_left_[version];
}

void StashedWeights::count_readers(const std::vector<schedule::Action>& actions) {
  for (const auto& a : actions) {
    if (schedule::is_compute(a.kind)) ++readers_left_[a.version];
  }
  // The initial weights are a version too, until the first update.
  if (master_version_ == 0 && readers_left_.count(0)) versions_.emplace(0, aliases_of(masters_));
}

bool StashedWeights::aliases_masters(int version) const {
  // after_step: plain 2BW aliases the new version to the masters; 2bw-predict stores a copy.
  return version == master_version_ && options_.predict_ahead == 0;
}

const std::vector<torch::Tensor>& StashedWeights::stashed(int version) const {
  const auto it = versions_.find(version);
  if (it == versions_.end() || aliases_masters(version)) {
    throw std::logic_error(fmt::format("stage {}: no stashed weight version {} to checkpoint",
                                       stage_, version));
  }
  return it->second;
}

void StashedWeights::resume(const std::vector<schedule::Action>& ahead, int updates,
                            std::map<int, std::vector<torch::Tensor>> saved) {
  master_version_ = updates;
  readers_left_.clear();
  count_final_readers();
  count_readers(ahead);
  versions_.clear();  // (made again below, from the masters and `saved`)
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

void StashedWeights::before_compute(const schedule::Action& action, torch::optim::Optimizer&) {
  point_views_at(versions_.at(action.version));
}

void StashedWeights::after_compute(const schedule::Action& action) {
  const auto readers = readers_left_.find(action.version);
  if (readers == readers_left_.end()) {
    throw std::logic_error(fmt::format("stage {}: weight version {} was read by more actions than "
                                       "were counted", stage_, action.version));
  }
  if (--readers->second > 0) return;
  readers_left_.erase(readers);  // (a long run's map stays as short as the versions alive)
  if (!holding_) {
    versions_.erase(action.version);
    release_views();  // the views must not keep a dropped version alive
  }
}

void StashedWeights::release_held() {
  holding_ = false;
  for (auto it = versions_.begin(); it != versions_.end();) {
    it = readers_left_.count(it->first) == 0 ? versions_.erase(it) : std::next(it);
  }
  release_views();
}

void StashedWeights::before_step() {
  move_gradients_to_masters();
  // Copy on write: the step updates the master in place, but a version may share its storage.
  const auto shared = versions_.find(master_version_);
  if (shared != versions_.end() && shared->second.front().data_ptr() == masters_.front().data_ptr()) {
    for (auto& m : masters_) m.set_data(m.variable_data().clone());
  }
  note_peak();
}

void StashedWeights::after_step(torch::optim::Optimizer& optimizer) {
  finish_update();
  if (readers_left_.count(master_version_)) versions_[master_version_] = new_version(optimizer);
  note_peak();
}

// The version the update just made: the masters themselves, or (2bw-predict) a copy
// extrapolated with the optimizer's own direction.
std::vector<torch::Tensor> StashedWeights::new_version(torch::optim::Optimizer& optimizer) const {
  if (options_.predict_ahead == 0) return aliases_of(masters_);
  std::vector<torch::Tensor> predicted;
  for (const auto& m : masters_) predicted.push_back(m.variable_data().clone());
  const double lr = current_learning_rate(optimizer);
  for (size_t i = 0; i < predicted.size(); ++i) {
    apply_prediction(predicted[i],
                     prediction_direction(optimizer, masters_[i], PredictionKind::OptimizerUpdate),
                     lr, options_.predict_ahead);
  }
  return predicted;
}

int StashedWeights::live_copies() const {
  // (The views' storage is the masters' or a version's, or with fixed addresses their own.)
  std::set<const void*> storages{masters_.front().data_ptr(), views_.front().data_ptr()};
  for (const auto& [version, tensors] : versions_) storages.insert(tensors.front().data_ptr());
  return int(storages.size());
}

std::vector<torch::Tensor> StashedWeights::held_tensors() const {
  std::vector<torch::Tensor> held = MasterWeights::held_tensors();
  for (const auto& [version, tensors] : versions_) held.insert(held.end(), tensors.begin(), tensors.end());
  return held;
}

}  // namespace pipetrain::runtime
