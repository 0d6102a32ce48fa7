#pragma once
// The weight-version policy of one pipeline stage for the no-flush schedules (2BW, PipeDream,
// PipeOptim, SpecTrain, 2BW with prediction, PipeDream without stashing).
//
// Why this shape: libtorch autograd keeps references to the parameter tensors a forward used
// (the parameter itself, and views such as weight.t() that point at its storage), and it checks
// version counters. So weights are never swapped or updated in place under a live graph:
//   - the stage module's parameters ("views") are what graphs read; before every compute action
//     they are re-pointed (set_data, no copy, no version bump) at the storage the action must
//     read;
//   - the optimizer owns separate "master" tensors: the latest weights;
//   - stashing policies keep each version as an immutable storage until its last reader is done;
//     before an optimizer step overwrites the master storage in place, the master moves to a
//     fresh copy if a version still needs the old one (copy on write). 2BW holds 2 copies.
//   - predicting policies let graphs read the master storage itself: the prediction is written
//     into it for the forward and undone right after, so the backward reads the weights live at
//     its own moment (PipeOptim), or SpecTrain's backward prediction (same trick). <= 2 copies.
#include <map>
#include <vector>

#include <torch/torch.h>

#include "schedule/schedule.h"

namespace pipetrain::runtime {

// The stashed versions (other than the masters' own storage) a 2BW checkpoint after `updates`
// updates holds, newest first; empty for policies that do not resume. Group g reads version
// g-1, so a continuation at step k reads k-1 (group k) and k (group k+1): k is the masters
// themselves unless 2bw-predict extrapolated it into a copy of its own.
std::vector<int> checkpointed_versions(const schedule::WeightPolicy& policy, int updates);

class WeightVersions {
 public:
  // `params`: the stage module's parameters, in module order. `worker`'s actions of `schedule`
  // tell how many compute actions read each version (when a stashed version can go).
  WeightVersions(const schedule::Schedule& schedule, int worker, int stage,
                 std::vector<torch::Tensor> params);

  // The tensors the optimizer updates (same order as `params`).
  const std::vector<torch::Tensor>& masters() const { return masters_; }

  void before_compute(const schedule::Action& action, torch::optim::Optimizer& optimizer);
  void after_compute(const schedule::Action& action);

  // Around one optimizer step: gradients go from the views to the masters; the master storage
  // is detached from any version that still needs it; the new version is recorded.
  void before_step();
  void after_step(torch::optim::Optimizer& optimizer);

  void point_at_latest();  // evaluation and checkpoints read the latest weights

  // Exact resume (2BW, 2bw-predict). A checkpoint at step k is the cut "every action of the
  // iterations < k done": it holds the masters (version k) and the stashed versions
  // checkpointed_versions() names; the stash of one of them:
  const std::vector<torch::Tensor>& stashed(int version) const;
  // Continues after `updates` updates on `remaining` (this worker's actions of the iterations
  // >= k, `iterations` in the whole list): the masters already hold version `updates`, and
  // `saved` gives the checkpointed versions (the readers of each are counted again).
  void resume(const std::vector<schedule::Action>& remaining, int iterations, int updates,
              std::map<int, std::vector<torch::Tensor>> saved);

  // Distinct weight copies (storages) the policy holds now / at its peak: the master, the
  // stashed versions, a prediction's saved original.
  int live_copies() const;
  int peak_copies() const { return peak_copies_; }
  // Every weight tensor held now (views, masters, stashed versions, a saved original); shared
  // storages are counted once by whoever sums their bytes.
  std::vector<torch::Tensor> held_tensors() const;

 private:
  bool stashing() const;
  bool aliases_masters(int version) const;
  void count_readers(const std::vector<schedule::Action>& actions, int iterations);
  void point_views_at(const std::vector<torch::Tensor>& tensors);
  void predict_in_master(int steps, torch::optim::Optimizer& optimizer);
  void note_peak();

  schedule::WeightPolicy policy_;
  int stage_;
  std::vector<torch::Tensor> views_, masters_;
  int master_version_ = 0;
  std::map<int, std::vector<torch::Tensor>> versions_;  // stashing: version -> its storage
  std::map<int, int> readers_left_;                     // stashing: version -> compute actions
  std::vector<torch::Tensor> saved_original_;           // predicting: master before prediction
  int peak_copies_ = 1;
};

}  // namespace pipetrain::runtime
