#include "train/async_reference.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/registry.h"
#include "model/token_batch.h"
#include "schedule/catalogue.h"
#include "train/lr_schedule.h"
#include "train/optim.h"
#include "train/prediction.h"

namespace pipetrain {
namespace {

std::vector<torch::Tensor> clones(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const auto& t : tensors) out.push_back(t.detach().clone());
  return out;
}

// Microbatch i of a global batch as w data-parallel replicas train it: replica r takes rows
// [r B/w, (r+1) B/w) in m microbatches, and update i sums the replicas' microbatch i.
Microbatch replicas_microbatch(const Microbatch& batch, int64_t i, int64_t m, int64_t w) {
  const int64_t rows = batch.inputs.size(0) / (m * w);
  if (w == 1) return rows_of(batch, i * rows, rows);
  std::vector<torch::Tensor> inputs, labels;
  for (int64_t r = 0; r < w; ++r) {
    const Microbatch part = replica_microbatch(batch, r, i, m, rows);
    inputs.push_back(part.inputs);
    labels.push_back(part.labels);
  }
  Microbatch out = batch;
  out.inputs = torch::cat(inputs);
  out.labels = torch::cat(labels);
  return out;
}

}  // namespace

AsyncReference::AsyncReference(const Config& config, const Dataset& data,
                               const std::vector<std::pair<int64_t, int64_t>>& stages)
    : AsyncReference(config, std::make_shared<TokenBatchSource>(data), stages) {}

AsyncReference::AsyncReference(const Config& config, std::shared_ptr<const BatchSource> batches,
                               const std::vector<std::pair<int64_t, int64_t>>& stages)
    : config_(config),
      batches_(std::move(batches)),
      schedule_(schedule::schedule_entry(config.pipeline.schedule)),
      stages_count_(int(stages.size())),
      loss_scale_(model_precision(config.model), config.train),
      history_(stages.size()) {
  if (schedule_.reference.forward == nullptr)
    fail("AsyncReference: no reference rule for schedule '{}'", schedule_.name);
  std::vector<std::pair<std::string, torch::Tensor>> all;
  model_ = make_model(config);
  const auto shared = model_->shared_parameters();
  const auto secondary = secondary_copies(*model_);
  shared_copies_.resize(shared.size());
  for (const auto& [first, last] : stages) {
    stages_.push_back(model_->make_stage(first, last));
    params_.push_back(stages_.back()->parameters());
    for (const auto& item : stages_.back()->named_parameters()) {
      all.emplace_back(item.key(), item.value());
      for (size_t g = 0; g < shared.size(); ++g) {
        for (const auto& copy : shared[g].copies) {
          if (copy.name == item.key()) shared_copies_[g].push_back(item.value());
        }
      }
      if (std::count(secondary.begin(), secondary.end(), item.key()) == 0) {
        norm_params_.push_back(item.value());
      }
    }
  }
  optimizer_ = make_optimizer(all, config.train, roles_of(*model_));
  record_version();
}

void AsyncReference::record_version() {
  for (int r = 0; r < stages_count_; ++r) {
    Version v;
    v.weights = clones(params_[r]);
    for (const auto& p : params_[r]) {
      auto d = prediction_direction(*optimizer_, p, prediction_kind());
      v.directions.push_back(d.defined() ? d.clone() : d);
    }
    v.lr = current_learning_rate(*optimizer_);
    history_[r][updates_] = std::move(v);
    // Nothing reads a version more than p + 1 updates old.
    while (history_[r].begin()->first < updates_ - stages_count_ - 2) history_[r].erase(history_[r].begin());
  }
}

PredictionKind AsyncReference::prediction_kind() const {
  return schedule_.reference.momentum_only ? PredictionKind::MomentumOnly
                                           : PredictionKind::OptimizerUpdate;
}

AsyncReference::Reads AsyncReference::forward_reads(int r, int64_t j) const {
  return schedule::reads_at(schedule_.reference.forward, r, j, stages_count_, int(config_.train.microbatches),
                           int(config_.pipeline.sync_warmup_steps));
}

AsyncReference::Reads AsyncReference::backward_reads(int r, int64_t j) const {
  return schedule::reads_at(schedule_.reference.backward, r, j, stages_count_, int(config_.train.microbatches),
                           int(config_.pipeline.sync_warmup_steps));
}

std::vector<torch::Tensor> AsyncReference::weights_for(int r, Reads reads) const {
  const Version& v = history_[r].at(reads.version);
  auto weights = clones(v.weights);
  for (size_t i = 0; i < weights.size(); ++i) {
    apply_prediction(weights[i], v.directions[i], v.lr, reads.predict);
  }
  return weights;
}

void AsyncReference::load(int r, const std::vector<torch::Tensor>& values) {
  torch::NoGradGuard no_grad;
  // Into the storage without a version bump: like the pipeline, the backward of a predicted
  // forward reads whatever weights its own moment calls for.
  for (size_t i = 0; i < values.size(); ++i) params_[r][i].variable_data().copy_(values[i]);
}

double AsyncReference::run_microbatch(int64_t j, const Microbatch& micro, double scale) {
  std::vector<std::vector<torch::Tensor>> live(static_cast<size_t>(stages_count_));
  for (int r = 0; r < stages_count_; ++r) {
    live[r] = clones(params_[r]);
    load(r, weights_for(r, forward_reads(r, j)));
  }
  auto x = micro.inputs;
  for (auto& stage : stages_) x = stage->forward(x);
  auto loss = stages_.back()->loss(x, micro.labels);
  for (int r = 0; r < stages_count_; ++r) load(r, weights_for(r, backward_reads(r, j)));
  update_scale_ = loss_scale_.scale_at(forward_reads(stages_count_ - 1, j).version);
  (loss / scale * update_scale_).backward();
  for (int r = 0; r < stages_count_; ++r) load(r, live[r]);
  return loss.item<double>();
}

StepResult AsyncReference::update(int64_t step) {
  StepResult result;
  // A shared parameter's copies on several stages get their summed gradient.
  for (auto& copies : shared_copies_) {
    if (copies.size() < 2) continue;
    auto sum = copies[0].grad().clone();
    for (size_t c = 1; c < copies.size(); ++c) sum += copies[c].grad();
    for (auto& copy : copies) copy.mutable_grad().copy_(sum);
  }
  std::vector<torch::Tensor> all;
  for (const auto& ps : params_) all.insert(all.end(), ps.begin(), ps.end());
  const double norm = std::sqrt(squared_grad_norm(norm_params_));
  result.grad_norm = norm / update_scale_;
  result.lr = learning_rate_at(config_.train, step);
  if (loss_scale_.active()) {
    result.loss_scale = update_scale_;
    result.skipped = !loss_scale_.record(norm);
  }
  if (!result.skipped) {
    unscale_and_clip(all, norm, update_scale_, config_.train.grad_clip);
    set_learning_rate(*optimizer_, result.lr);
    optimizer_->step();
  }
  optimizer_->zero_grad();
  ++updates_;
  record_version();
  return result;
}

StepResult AsyncReference::train_step(int64_t step) {
  const auto& train = config_.train;
  const Microbatch batch = batches_->train_batch(uint64_t(train.seed), step, train.batch_size);
  const int64_t m = train.microbatches, w = config_.pipeline.dp_width;
  const bool each = schedule_.updates_per_microbatch();
  double loss_sum = 0;
  StepResult result;
  for (int64_t i = 0; i < m; ++i) {
    loss_sum += run_microbatch(step * m + i, replicas_microbatch(batch, i, m, w), each ? 1.0 : double(m));
    if (each) result = update(step);
  }
  if (!each) result = update(step);
  result.loss = loss_sum / double(m);
  return result;
}

std::vector<std::pair<std::string, torch::Tensor>> AsyncReference::named_weights() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& stage : stages_) {
    for (const auto& item : stage->named_parameters()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

}  // namespace pipetrain
