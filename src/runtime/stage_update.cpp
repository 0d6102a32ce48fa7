// StageExecutor's update: the replicas' gradient sums, the global norm, the shared parameters'
// gradient sums (posted as soon as a group's gradient is complete, waited for where the new
// version is first read), then the optimizer step.
#include <chrono>
#include <cmath>
#include <future>

#include "runtime/stage_executor.h"
#include "schedule/catalogue.h"
#include "schedule/run_rules.h"
#include "train/lr_schedule.h"
#include "train/optim.h"

namespace pipetrain::runtime {

// The chunk's gradients summed over its replicas (one flat buffer, one Gloo call), posted. Every
// parameter gets a gradient tensor for the sum to land in; it moves to the master at the update
// (no-flush policies), while the run-on's backwards add up the next gradients in fresh tensors.
void StageExecutor::post_replica_sums(int chunk) {
  if (groups_.replicas < 0) return;
  std::vector<torch::Tensor> grads;
  for (auto& p : chunks_.at(size_t(chunk)).model->parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  posted_gradient_sums_.push_back({PostedFlatSum(comm_, groups_.replicas, grads), grads});
  // Replicas normalise their own microbatches, so their running statistics drift apart: each
  // gradient sum sets them to the replicas' mean, so every replica evaluates and checkpoints the
  // same model.
  const auto statistics = running_statistics(chunk);
  if (!statistics.empty()) posted_statistics_.emplace(chunk, PostedFlatSum(comm_, groups_.replicas, statistics));
  if (!schedule::posts_replica_sums(lists_.schedule())) {  // a flush waits here anyway
    land_replica_sums(posted_gradient_sums_);
    finish_running_statistics(chunk, -1);
  }
}

// BatchNorm's running means and variances (a chunk's floating-point buffers).
std::vector<torch::Tensor> StageExecutor::running_statistics(int chunk) const {
  std::vector<torch::Tensor> statistics;
  for (const auto& buffer : chunks_.at(size_t(chunk)).model->buffers()) {
    if (buffer.is_floating_point()) statistics.push_back(buffer);
  }
  return statistics;
}

void StageExecutor::land_replica_sums(std::vector<ReplicaGradients>& sums) {
  for (auto& posted : sums) {
    const auto pieces = posted.sum.finish();
    // Copied, not aliased: zero_grad detaches gradients in place, which views forbid.
    for (size_t i = 0; i < pieces.size(); ++i) posted.grads[i].copy_(pieces[i]);
    posted.sum.release();
  }
  sums.clear();
}

// The mean lands in the buffers before the chunk's next forward updates them (the order a
// blocking all-reduce gave): tiny, so this wait costs the replicas' skew, not a transfer.
void StageExecutor::finish_running_statistics(int chunk, int stage) {
  const auto posted = posted_statistics_.find(chunk);
  if (posted == posted_statistics_.end()) return;
  const size_t start = trace_mark();
  const auto statistics = running_statistics(chunk);
  const auto sums = posted->second.finish();
  posted_statistics_.erase(posted);
  for (size_t i = 0; i < statistics.size(); ++i) overwrite_buffer(statistics[i], sums[i] / double(layout_.replicas));
  if (stage >= 0) trace({fmt::format("{}UW", stage), "UpdateWait", 0, 0, -1, int(current_step_)}, start);
}

// The replica sums must land before the global norm, and the norm's sum over the stages must be
// posted without waiting for anything but the replicas: a stage that posted it only at its
// finish point could wait there for a peer that waits on it. The main thread may by then be
// blocked in a receive, which Gloo cannot poll (a receive completes only inside its wait), so a
// helper thread waits for the replica sums and posts the norm; the main thread keeps running the
// schedule and joins it at the finish point. Flush schedules and w = 1 post at once: their
// replica sums are done (at AllReduceGrads) or absent.
void StageExecutor::begin_update(int produced_version) {
  if (flushes()) comm_.wait_sends();  // a flush: the iteration's sends are done before its update
  // Graphed passes keep adding into the parameters' gradients, so an update takes a copy of
  // them (WeightVersions::fix_addresses): the replicas' sums must have landed there first.
  if (pass_graphs_ready_) land_replica_sums(posted_gradient_sums_);
  for (auto& chunk : chunks_) chunk.weights->before_step();
  PendingUpdate update;
  update.version = produced_version;
  if (posted_gradient_sums_.empty()) {
    update.posted = post_norm();
  } else {
    update.posting = std::async(std::launch::async, [this, sums = std::move(posted_gradient_sums_)]() mutable {
      at::init_num_threads();  // the main thread's intra-op threads: the norm sums alike
      land_replica_sums(sums);
      return post_norm();
    });
    posted_gradient_sums_.clear();
  }
  pending_update_ = std::move(update);
}

// After the replica sums every replica holds the same gradients: the norm is summed over one
// replica's pipeline only.
StageExecutor::PostedNorm StageExecutor::post_norm() {
  PostedNorm posted;
  begin_shared_gradients(posted.shared_reductions);
  posted.squared_norm = torch::full({1}, squared_grad_norm(norm_params_), torch::kFloat64);
  posted.norm_reduction = comm_.post_all_reduce_sum(posted.squared_norm, groups_.pipeline);
  return posted;
}

// The timeline shows the wait for the reductions (UpdateWait: idle, the other stages are still
// busy) apart from the update itself (OptimizerStep), so measured bubbles count the wait.
void StageExecutor::finish_update(int stage, int64_t step) {
  PendingUpdate update = std::move(*pending_update_);
  pending_update_.reset();
  size_t start = trace_mark();
  if (update.posting.valid()) update.posted = update.posting.get();
  finish_shared_gradients(update.posted.shared_reductions);
  comm_.wait_all_reduce(update.posted.norm_reduction);
  trace({fmt::format("{}UW", stage), "UpdateWait", 0, 0, -1, int(step)}, start);
  start = trace_mark();
  apply_update(std::sqrt(update.posted.squared_norm.item<double>()), update.version);
  trace({fmt::format("{}U", stage), "OptimizerStep", 0, 0, -1, int(step)}, start);
}

// The gradients carry the scale of the version the last stage's forwards of this update read:
// the latest one, or under 2BW one behind (schedule::loss_version).
double StageExecutor::update_loss_scale(int produced_version) const {
  if (!loss_scale_.active()) return 1;
  return loss_scale_.scale_at(schedule::loss_version(schedule_entry_, run_version(produced_version) - 1,
                                                     layout_.stages(), int(config_.train.microbatches),
                                                     int(config_.pipeline.sync_warmup_steps)));
}

// Float16: the norm is of the loss-scaled gradients; every worker reads the same one after its
// all-reduce, so all skip an overflowed step alike (and the scale moves alike).
void StageExecutor::apply_update(double global_norm, int produced_version) {
  const double scale = update_loss_scale(produced_version);
  result_.grad_norm = global_norm / scale;
  result_.lr = learning_rate_at(config_.train, current_step_);
  if (loss_scale_.active()) {
    result_.loss_scale = scale;
    result_.skipped = !loss_scale_.record(global_norm);
  }
  if (!result_.skipped) {
    unscale_and_clip(step_params_, global_norm, scale, config_.train.grad_clip);
    if (zero1_) {
      zero1_->step(result_.lr);  // this replica's shard, then all-gather
    } else {
      set_learning_rate(*optimizer_, result_.lr);
      optimizer_->step();
    }
  }
  for (auto& chunk : chunks_) chunk.weights->after_step(optimizer());
}

// A shared parameter's copies (GPT: the embedding and the head's copy) all get the summed
// gradient (after the replica all-reduce, so the sum covers every replica), and identical
// updates keep them equal. The worker that counts a group in the norm needs its sum before it
// can post its norm; the others (the head's copy on the last stage, which finishes the group's
// backwards first) wait only when the update is finished.
void StageExecutor::begin_shared_gradients(std::vector<int>& pending) {
  pending.assign(shared_copies_.size(), -1);
  for (size_t g = 0; g < shared_copies_.size(); ++g) {
    auto& copies = shared_copies_[g];
    const int group = g < groups_.shared.size() ? groups_.shared[g] : -1;
    if (copies.empty() || (copies.size() == 1 && group < 0)) continue;
    torch::Tensor& sum = copies[0].mutable_grad();
    for (size_t c = 1; c < copies.size(); ++c) sum += copies[c].grad();
    if (group < 0) continue;
    pending[g] = comm_.post_all_reduce_sum(sum, group);
    if (shared_in_norm_[g]) {
      comm_.wait_all_reduce(pending[g]);
      pending[g] = -1;
    }
  }
}

void StageExecutor::finish_shared_gradients(const std::vector<int>& pending) {
  for (size_t g = 0; g < shared_copies_.size(); ++g) {
    if (pending[g] >= 0) comm_.wait_all_reduce(pending[g]);
    auto& copies = shared_copies_[g];
    for (size_t c = 1; c < copies.size(); ++c) copies[c].mutable_grad().copy_(copies[0].grad());
  }
}

}  // namespace pipetrain::runtime
