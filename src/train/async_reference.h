#pragma once
// The single-process reference for the no-flush weight policies: the whole model in one
// process, cut into the same stages as the pipeline, trained microbatch after microbatch with
// each policy's update rule written out directly (the closed forms of its catalogue entry, no
// schedule):
//   2bw                W(t+1) = W(t) - lr * update(grad f(W(t-1))): group g of m microbatches
//                      reads version max(0, g-1) for its forward and backward
//   2bw-predict        as 2bw, but group g reads W(g-1) extrapolated one update ahead
//   pipedream          microbatch j, stage r: forward and backward read version max(0, j-(p-1-r))
//   pipedream-nostash  forward reads that version, backward the latest (version j)
//   pipeoptim          forward reads version max(0, j-(p-1-r)) predicted s = p-1-r updates ahead
//                      with the optimizer's own direction; backward reads version j
//   spectrain          forward predicted floor(r/2) + p-1-r ahead, backward version j predicted
//                      floor(r/2) ahead, both with the momentum only
// Per-microbatch policies update after every microbatch (its own mean loss); 2BW after m.
// Float16: each microbatch's loss is scaled by the loss scale of the version the last stage reads
// (train/loss_scale.h), and its update divides that one out, or is skipped on an overflow.
// A step is one global batch of m microbatches, as in the pipeline's metrics. With
// pipeline.dp_width = w, microbatch i joins replica r's microbatch i of rows [r B/w, (r+1) B/w)
// for every r: what the replicas' summed gradients of update i cover.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "data/dataset.h"
#include "model/batch_source.h"
#include "model/model.h"
#include "schedule/catalogue.h"
#include "train/loss_scale.h"
#include "train/prediction.h"
#include "train/step_result.h"

namespace pipetrain {

class AsyncReference {
 public:
  // `stages`: the pipeline's [first, last) layer range per stage.
  AsyncReference(const Config& config, std::shared_ptr<const BatchSource> batches,
                 const std::vector<std::pair<int64_t, int64_t>>& stages);
  AsyncReference(const Config& config, const Dataset& data,  // token windows
                 const std::vector<std::pair<int64_t, int64_t>>& stages);
  StepResult train_step(int64_t step);
  // Every stage's parameters by name (a stage may hold its own copy of a shared parameter).
  std::vector<std::pair<std::string, torch::Tensor>> named_weights() const;

 private:
  struct Version {  // one stage after some number of updates
    std::vector<torch::Tensor> weights, directions;
    double lr = 0;
  };
  using Reads = schedule::Reads;  // what one microbatch reads on one stage
  PredictionKind prediction_kind() const;
  Reads forward_reads(int stage, int64_t microbatch) const;
  Reads backward_reads(int stage, int64_t microbatch) const;
  std::vector<torch::Tensor> weights_for(int stage, Reads reads) const;
  double run_microbatch(int64_t microbatch, const Microbatch& micro, double scale);
  StepResult update(int64_t step);
  void record_version();
  void load(int stage, const std::vector<torch::Tensor>& values);

  Config config_;
  std::shared_ptr<const BatchSource> batches_;
  const schedule::ScheduleEntry& schedule_;
  int stages_count_;
  std::shared_ptr<const Model> model_;
  std::vector<std::shared_ptr<StageModule>> stages_;
  std::vector<std::vector<torch::Tensor>> params_;  // per stage
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::vector<torch::Tensor> norm_params_;  // each shared parameter once
  std::vector<std::vector<torch::Tensor>> shared_copies_;  // per shared parameter, in copy order
  int updates_ = 0;
  LossScale loss_scale_;
  double update_scale_ = 1;  // float16: the loss scale of the update being accumulated
  std::vector<std::map<int, Version>> history_;  // per stage: version -> weights
};

}  // namespace pipetrain
