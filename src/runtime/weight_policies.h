#pragma once
// The no-flush weight policies behind WeightVersions (see weight_versions.h for why they keep
// views and masters). Internal to the runtime: make_weight_versions picks one.
#include <map>
#include <set>
#include <vector>

#include "runtime/weight_versions.h"
#include "train/prediction.h"

namespace pipetrain::runtime {

// What the no-flush policies share: graphs read the module's parameters ("views"), the optimizer
// updates separate masters (the latest weights), and gradients move from one to the other at
// each update.
class MasterWeights : public WeightVersions {
 public:
  explicit MasterWeights(std::vector<torch::Tensor> params);
  const std::vector<torch::Tensor>& optimized() const override { return masters_; }
  void point_at_latest() override { point_views_at(masters_); }
  int peak_copies() const override { return peak_copies_; }
  std::vector<torch::Tensor> held_tensors() const override;
  void fix_addresses() override;

 protected:
  // The views show `tensors`: pointed at them, or (fixed addresses) a copy in their own storage.
  void point_views_at(const std::vector<torch::Tensor>& tensors);
  // After a compute action: the views let go of the version it read (fixed: they hold none).
  void release_views();
  // Whether compute actions read other storages than the masters' (stashed versions): with
  // fixed addresses, the views then need a storage of their own.
  virtual bool views_follow_versions() const { return false; }
  void move_gradients_to_masters();
  void finish_update();  // the masters' gradients are spent; one more version exists
  virtual int live_copies() const = 0;
  void note_peak();

  std::vector<torch::Tensor> views_, masters_;
  int master_version_ = 0;
  bool fixed_addresses_ = false;

 private:
  int peak_copies_ = 1;
};

// PipeDream-2BW (versions kept for the final checkpoint, optionally extrapolated `predict_ahead`
// updates) and PipeDream (a version per update, kept until its last reader is done).
class StashedWeights : public MasterWeights {
 public:
  struct Options {
    bool keep_final_versions = false;  // 2BW: the final checkpoint continues too
    int predict_ahead = 0;             // 2bw-predict: each new version extrapolated this far
    // PipeDream: the versions a final checkpoint holds so that it continues (what the forwards
    // ahead of the next step would read, schedule::checkpointed_versions), kept to the end.
    std::vector<int> continued_versions;
  };
  // `iterations`: the run's (its final versions). Readers are counted as the steps come
  // (count_readers).
  StashedWeights(int iterations, int stage, Options options, std::vector<torch::Tensor> params);
  void count_readers(const std::vector<schedule::Action>& actions) override;
  void before_compute(const schedule::Action& action, torch::optim::Optimizer&) override;
  void after_compute(const schedule::Action& action) override;
  void hold_releases() override { holding_ = true; }
  void release_held() override;
  void before_step() override;
  void after_step(torch::optim::Optimizer& optimizer) override;
  const std::vector<torch::Tensor>& stashed(int version) const override;
  void resume(const std::vector<schedule::Action>& ahead, int updates,
              std::map<int, std::vector<torch::Tensor>> saved) override;
  std::vector<torch::Tensor> held_tensors() const override;

 private:
  bool views_follow_versions() const override { return true; }
  int live_copies() const override;
  bool aliases_masters(int version) const;
  void count_final_readers();  // the versions kept to the end, never read
  std::vector<torch::Tensor> new_version(torch::optim::Optimizer& optimizer) const;

  Options options_;
  int iterations_;
  int stage_;
  std::map<int, std::vector<torch::Tensor>> versions_;  // version -> its storage
  std::map<int, int> readers_left_;  // version -> compute actions counted and not yet run
  bool holding_ = false;                                // versions without readers stay
};

// PipeOptim, SpecTrain and PipeDream without stashing: every action reads the latest weights,
// extrapolated `forward_ahead` updates for a forward and `backward_ahead` for a backward. In a
// step a checkpoint may follow, a forward that runs ahead of the step keeps a copy of what it
// read until the next step begins: the checkpoint holds it, and the resumed forward reads it
// again.
class PredictedWeights : public MasterWeights {
 public:
  // `continued_versions`: the versions whose predictions a final checkpoint holds (what the next
  // step's forwards would read), made right after the update that makes each.
  PredictedWeights(int forward_ahead, int backward_ahead, PredictionKind kind,
                   std::vector<torch::Tensor> params, std::vector<int> continued_versions = {});
  void before_compute(const schedule::Action& action, torch::optim::Optimizer& optimizer) override;
  void after_compute(const schedule::Action& action) override;
  void before_step() override;
  void after_step(torch::optim::Optimizer& optimizer) override;
  void begin_step(int64_t step, bool checkpoint_may_follow) override;
  bool keeps_checkpoint_state() const override { return keep_ahead_reads_; }
  const std::vector<torch::Tensor>& stashed(int version) const override;
  void resume(const std::vector<schedule::Action>& ahead, int updates,
              std::map<int, std::vector<torch::Tensor>> saved) override;
  std::vector<torch::Tensor> held_tensors() const override;

 private:
  int live_copies() const override;
  void predict(const schedule::Action& action, torch::optim::Optimizer& optimizer);
  void write_into_masters(const std::vector<torch::Tensor>& weights);
  std::vector<torch::Tensor> forward_prediction(torch::optim::Optimizer& optimizer) const;

  int forward_ahead_, backward_ahead_;
  PredictionKind kind_;
  std::vector<torch::Tensor> saved_original_;  // the masters before a prediction, to undo it
  int64_t step_ = 0;                           // the step being run
  bool keep_ahead_reads_ = true;               // a checkpoint may follow it
  std::map<int, std::vector<torch::Tensor>> ahead_reads_;    // version -> what forwards ahead read
  std::map<int, std::vector<torch::Tensor>> resumed_reads_;  // the same, from a checkpoint
  std::map<int, int> resumed_readers_;                       // version -> forwards left to read it
  std::set<int> continued_versions_;
  std::map<int, std::vector<torch::Tensor>> continued_reads_;  // version -> its forward prediction
};

}  // namespace pipetrain::runtime
