#pragma once
// The single-process trainer: the reference every pipelined run is compared against.
// One step = the global batch split into equal microbatches, each microbatch's mean loss scaled
// by 1/m and back-propagated (gradient accumulation), global-norm clipping, then one update.
#include <functional>
#include <memory>

#include <torch/torch.h>

#include "core/config.h"
#include "data/dataset.h"
#include "device/execution.h"
#include "device/step_runner.h"
#include "model/batch_source.h"
#include "model/model.h"
#include "train/loss_scale.h"
#include "train/step_result.h"

namespace pipetrain {

class Trainer {
 public:
  Trainer(const Config& config, std::shared_ptr<const BatchSource> batches);
  Trainer(const Config& config, const Dataset& data);  // token windows (`data` outlives it)
  StepResult train_step(int64_t step);
  // Mean validation loss and measures over eval.batches fixed batches, the model in eval mode
  // (BatchNorm normalises with its running statistics).
  // `stoppable`: a stop (SIGINT/SIGTERM) may end it after any batch (then cut_short).
  // `after_batch(done, total)` after each batch (a progress line), if given.
  Validation evaluate(bool stoppable, const std::function<void(int64_t, int64_t)>& after_batch = {});

  const Model& model_definition() const { return *definition_; }
  StageModule& model() { return *model_; }  // every layer
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  std::vector<torch::Tensor> parameters() { return model_->parameters(); }
  const device::Execution& execution() const { return execution_; }
  const c10::Device& device() const { return device_; }
  LossScale& loss_scale() { return loss_scale_; }  // float16's scale, saved in checkpoints

 private:
  // Zeroed gradients, then every microbatch's forward and backward, the norm and the clipping
  // (float16: the loss scaled, and the host unscales and clips): what a graphed step replays.
  // {loss summed over the microbatches (float64), gradient norm}.
  std::vector<torch::Tensor> forward_backward(const Microbatch& batch);
  // The update after the backward: clipping (float16: unscaling) and the optimizer's step, unless
  // the scaled gradients overflowed.
  void update(const torch::Tensor& norm, StepResult& result);

  Config config_;
  device::Execution execution_;  // train.device and model.dtype for one worker
  c10::Device device_;
  std::shared_ptr<const BatchSource> batches_;
  std::shared_ptr<const Model> definition_;
  std::shared_ptr<StageModule> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<device::StepRunner> steps_;  // eager, or replays of a captured step
  LossScale loss_scale_;
  torch::Tensor loss_factor_;  // float16: the loss scale on the device (a captured step reads it)
};

}  // namespace pipetrain
