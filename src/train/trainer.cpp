#include "train/trainer.h"

#include <cmath>

#include "core/error.h"
#include "core/stop_signal.h"
#include "device/placement.h"
#include "device/step_runner.h"
#include "model/registry.h"
#include "model/token_batch.h"
#include "train/evaluation.h"
#include "train/lr_schedule.h"
#include "train/optim.h"

namespace pipetrain {
namespace {

// The module on `device`, before any optimizer or weight version holds its parameters.
std::shared_ptr<StageModule> placed(std::shared_ptr<StageModule> module, const c10::Device& device) {
  module->to(device);
  return module;
}

}  // namespace

Trainer::Trainer(const Config& config, const Dataset& data)
    : Trainer(config, std::make_shared<TokenBatchSource>(data)) {}

Trainer::Trainer(const Config& config, std::shared_ptr<const BatchSource> batches)
    : config_(config),
      execution_(device::with_cuda_graphs(
          device::decide_execution_here(config.train.device, config.model.dtype, 1),
          config.train.cuda_graphs)),
      device_(device::worker_device(execution_, 0)),
      batches_(std::move(batches)),
      definition_(make_model(config)),
      model_(placed(definition_->make_whole(), device_)),
      optimizer_(make_optimizer(named_tensors(*model_), config.train, roles_of(*definition_))),
      steps_(device::make_step_runner(execution_, device_)),
      loss_scale_(device::precision_of(execution_.precision), config.train) {
  if (loss_scale_.active()) loss_factor_ = torch::ones({}, torch::TensorOptions().device(device_));
}

StepResult Trainer::train_step(int64_t step) {
  const auto& train = config_.train;
  const Microbatch batch = on_device(
      batches_->train_batch(static_cast<uint64_t>(train.seed), step, train.batch_size), device_);
  if (loss_scale_.active()) loss_factor_.fill_(loss_scale_.factor());
  const auto outputs = steps_->run({batch.inputs, batch.labels}, [this](const auto& inputs) {
    return forward_backward({inputs[0], inputs[1]});
  });
  const torch::Tensor &loss_sum = outputs[0], &norm = outputs[1];
  StepResult result;
  result.lr = learning_rate_at(train, step);
  set_learning_rate(*optimizer_, result.lr);
  update(norm, result);
  result.loss = loss_sum.item<double>() / static_cast<double>(train.microbatches);
  return result;
}

void Trainer::update(const torch::Tensor& norm, StepResult& result) {
  if (!loss_scale_.active()) {
    optimizer_->step();
    result.grad_norm = norm.item<double>();  // the step's one wait, after the update is queued
    return;
  }
  // Float16: whether the update applies is the norm's to say, so the host waits for it first.
  const double scaled_norm = norm.item<double>(), scale = loss_scale_.factor();
  result.loss_scale = scale;
  result.grad_norm = scaled_norm / scale;
  result.skipped = !loss_scale_.record(scaled_norm);
  if (result.skipped) return;
  unscale_and_clip(parameters(), scaled_norm, scale, config_.train.grad_clip);
  optimizer_->step();
}

std::vector<torch::Tensor> Trainer::forward_backward(const Microbatch& batch) {
  const auto& train = config_.train;
  const int64_t micro_size = train.batch_size / train.microbatches;
  optimizer_->zero_grad();
  torch::Tensor loss_sum;  // float64 on the device: read once, after the last microbatch
  for (int64_t m = 0; m < train.microbatches; ++m) {
    const Microbatch tensors = rows_of(batch, m * micro_size, micro_size);
    auto loss = model_->loss(model_->forward(tensors.inputs), tensors.labels);
    auto share = loss / static_cast<double>(train.microbatches);
    (loss_factor_.defined() ? share * loss_factor_ : share).backward();
    const auto value = loss.detach().to(torch::kFloat64);
    loss_sum = loss_sum.defined() ? loss_sum + value : value;
  }
  const auto params = parameters();
  // The norm and the clipping stay on the device: the host queues the update right behind the
  // backward instead of waiting for the norm.
  const torch::Tensor norm = grad_norm_on_device(params);
  if (!loss_scale_.active()) clip_grads_to_norm(params, norm, train.grad_clip);
  return {loss_sum, norm};
}

Validation Trainer::evaluate(bool stoppable, const std::function<void(int64_t, int64_t)>& after_batch) {
  torch::NoGradGuard no_grad;
  EvalMode eval_mode(*model_);
  const int64_t batch_size = config_.train.batch_size;
  MeasureMeans means;
  bool cut_short = false;
  for (int64_t i = 0; i < config_.eval.batches; ++i) {
    // A stop (SIGINT/SIGTERM) cuts a long validation short: the loop checkpoints right after.
    if (i > 0 && stoppable && stop_signal() != 0) {
      cut_short = true;
      break;
    }
    const Microbatch batch = on_device(batches_->val_batch(i, batch_size), device_);
    means.add(*model_, model_->forward(batch.inputs), batch.labels);
    if (after_batch) after_batch(i + 1, config_.eval.batches);
  }
  Validation validation = means.result();
  validation.cut_short = cut_short;
  return validation;
}

}  // namespace pipetrain
