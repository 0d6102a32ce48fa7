#pragma once
// The weight policy of one model chunk, as an object: which weights each compute action reads
// and what the optimizer updates. One interface, three policies (make_weight_versions picks by
// the schedule's policy kind):
//   - sync (GPipe, 1F1B, interleaved, ...): one version, the module's own parameters;
//   - stashing (PipeDream-2BW, its predicted variant, PipeDream): each version kept until its
//     last reader is done;
//   - predicting (PipeOptim, SpecTrain, PipeDream without stashing): the latest weights,
//     extrapolated for the actions that predict.
//
// Why the no-flush policies look this way: libtorch autograd keeps references to the parameter
// tensors a forward used (the parameter itself, and views such as weight.t() that point at its
// storage), and it checks version counters. So weights are never swapped or updated in place
// under a live graph:
//   - the chunk module's parameters ("views") are what graphs read; before every compute action
//     they are re-pointed (set_data, no copy, no version bump) at the storage the action must
//     read (or, once CUDA graphs fix their addresses, that storage is copied into theirs);
//   - the optimizer owns separate "master" tensors: the latest weights;
//   - stashing keeps each version as an immutable storage until its last reader is done; before
//     an optimizer step overwrites the master storage in place, the master moves to a fresh copy
//     if a version still needs the old one (copy on write). 2BW holds 2 copies.
//   - predicting lets graphs read the master storage itself: the prediction is written into it
//     for the forward and undone right after, so the backward reads the weights live at its own
//     moment (PipeOptim), or SpecTrain's backward prediction (same trick). <= 2 copies.
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "schedule/schedule.h"

namespace pipetrain::runtime {

class WeightVersions {
 public:
  virtual ~WeightVersions() = default;

  // The tensors the optimizer updates, in the module's parameter order.
  virtual const std::vector<torch::Tensor>& optimized() const = 0;

  // Around each compute action: the module's parameters show the weights it reads. `optimizer`
  // supplies a prediction's direction.
  virtual void before_compute(const schedule::Action&, torch::optim::Optimizer&) {}
  virtual void after_compute(const schedule::Action&) {}
  // The chunk's actions of a step ahead (schedule::StepLists::reader_span steps at most): the
  // readers of the versions they name, so that a version lives until its last reader is done.
  virtual void count_readers(const std::vector<schedule::Action>&) {}

  // Around one optimizer step.
  virtual void before_step() {}
  virtual void after_step(torch::optim::Optimizer&) {}

  virtual void point_at_latest() {}  // evaluation and checkpoints read the latest weights

  // From now on the module's parameters and their gradients keep their addresses, since CUDA
  // graphs read and write them there (train.cuda_graphs on pipeline workers): a version is
  // copied into the parameters' own storage instead of pointed at (one more copy of the
  // weights, where versions alternate), and gradients are copied to the masters at an update
  // and zeroed in place.
  virtual void fix_addresses() {}

  // A no-flush step runs on past its update into the next iteration (schedule/steps.h), but a
  // checkpoint between steps is the cut "iterations < k done": versions whose last readers ran
  // in the run-on must survive until the step ends. Held from the update to release_held().
  virtual void hold_releases() {}
  virtual void release_held() {}
  // Step `step` begins (after release_held): actions of later iterations run ahead of it.
  // `checkpoint_may_follow`: keep what a checkpoint after it holds (policies that do not hold it
  // anyway copy it only then); keeps_checkpoint_state() says whether the step did.
  virtual void begin_step(int64_t /*step*/, bool /*checkpoint_may_follow*/) {}
  virtual bool keeps_checkpoint_state() const { return true; }

  // Exact resume. A checkpoint at step k is the cut "every action of the iterations < k done":
  // it holds the masters (the latest version) and the versions schedule::checkpointed_versions()
  // names, the weights that actions of iterations >= k read before the cut (stashing: the stash;
  // prediction: the predicted weights a forward ahead of its step read). One of them:
  virtual const std::vector<torch::Tensor>& stashed(int version) const;
  // Continues after `updates` updates: the masters already hold version `updates`, `saved`
  // gives the checkpointed versions, and `ahead` is the chunk's actions of the resumed steps as
  // far as readers are counted ahead (the readers are counted again from them).
  virtual void resume(const std::vector<schedule::Action>& ahead, int updates,
                      std::map<int, std::vector<torch::Tensor>> saved);

  // Most distinct weight copies (storages) held at once: the master, stashed versions, a
  // prediction's saved original.
  virtual int peak_copies() const { return 1; }
  // Every weight tensor held besides the module's parameters (masters, stashed versions, a saved
  // original); shared storages are counted once by whoever sums their bytes.
  virtual std::vector<torch::Tensor> held_tensors() const { return {}; }
};

// The policy of the chunk holding pipeline `stage` in a run of `iterations` (whose readers of
// each stashed version come through count_readers). `params`: the chunk module's parameters.
// `continued_versions`: what a final checkpoint holds besides the latest weights
// (schedule::checkpointed_versions after the last step), kept until the end by the policies
// that would otherwise drop them.
std::unique_ptr<WeightVersions> make_weight_versions(const schedule::WeightPolicy& policy,
                                                     int iterations, int stage,
                                                     std::vector<torch::Tensor> params,
                                                     std::vector<int> continued_versions = {});

}  // namespace pipetrain::runtime
