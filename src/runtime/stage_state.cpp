// StageExecutor's state for checkpoints and resume: the optimized tensors and optimizer state
// by name, the stashed versions, and where a resumed run takes up its action list.
#include <algorithm>

#include "runtime/stage_executor.h"
#include "schedule/run_rules.h"
#include "train/checkpoint.h"
#include "train/lr_schedule.h"
#include "train/optim.h"

namespace pipetrain::runtime {

std::vector<std::pair<std::string, torch::Tensor>> StageExecutor::optimizer_state(
    const Chunk& chunk) {
  if (zero1_) return zero1_->state_tensors(optimized_tensors(chunk));  // a collective of the replicas
  return optimizer_state_tensors(*optimizer_, optimized_tensors(chunk));
}

void StageExecutor::load_state(const CheckpointTensors& tensors, const std::string& origin) {
  const auto shared = model_->shared_parameters();
  if (!zero1_) {
    // No-flush policies: before any compute the module's parameters share the masters'
    // storage, so loading the module fills the masters.
    for (const auto& chunk : chunks_) {
      load_module_state(tensors, origin, *chunk.model, *optimizer_, shared, optimized_tensors(chunk));
    }
    return;
  }
  // ZeRO-1: the checkpoint holds every parameter's whole state (any width wrote it); loaded
  // whole as an unsharded run would, then this replica keeps its shard.
  std::vector<std::pair<std::string, torch::Tensor>> optimized, state;
  for (const auto& chunk : chunks_) {
    const auto named = optimized_tensors(chunk);
    auto whole = make_optimizer(named, config_.train, roles_of(*model_));
    load_module_state(tensors, origin, *chunk.model, *whole, shared, named);
    const auto chunk_state = optimizer_state_tensors(*whole, named);
    optimized.insert(optimized.end(), named.begin(), named.end());
    state.insert(state.end(), chunk_state.begin(), chunk_state.end());
  }
  zero1_->load_state(optimized, state);
}

std::vector<std::pair<std::string, torch::Tensor>> StageExecutor::optimized_tensors(
    const Chunk& chunk) const {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  const auto& tensors = chunk.weights->optimized();
  size_t index = 0;
  for (const auto& item : chunk.model->named_parameters()) {
    named.emplace_back(item.key(), tensors.at(index++));
  }
  return named;
}

void StageExecutor::point_at_latest_weights() {
  for (auto& chunk : chunks_) chunk.weights->point_at_latest();
}

std::vector<std::pair<std::string, torch::Tensor>> StageExecutor::stashed_version(
    const Chunk& chunk, int version) const {
  const auto& tensors = chunk.weights->stashed(version);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  size_t index = 0;
  for (const auto& item : chunk.model->named_parameters()) {
    named.emplace_back(item.key(), tensors.at(index++));
  }
  return named;
}

int64_t StageExecutor::updates_before(int64_t step) const {
  return step * config_.train.microbatches / microbatches_per_update_;
}

int64_t StageExecutor::run_version(int list_version) const {
  return list_start(current_step_) + list_version;
}

// The actions of the iterations < step all ran before the checkpoint (each step ends with its
// update, and the barrier of the checkpoint saw every update); those of later iterations that
// ran early (the first stages' warm-up forwards of the next group) run again from the saved
// versions they read: the same inputs, the same weights, the same results. Dropping matched
// send/recv pairs keeps the lists deadlock-free.
void StageExecutor::resume_at(int64_t step,
                              std::vector<std::map<int, std::vector<torch::Tensor>>> stashed) {
  if (flushes() || step == 0) return;  // one iteration's list, the same at every step
  resumed_at_ = step;
  // Predictions before the first update read the learning rate of the last one.
  set_learning_rate(optimizer(), learning_rate_at(config_.train, step - 1));
  const int updates = int(updates_before(step));
  // The readers ahead are counted again, from the resumed step on.
  readers_counted_to_ = step - 1;
  const auto ahead = readers_ahead_of(step);
  for (size_t c = 0; c < chunks_.size(); ++c) {
    chunks_[c].weights->resume(ahead[c], updates, std::move(stashed.at(c)));
  }
}

bool StageExecutor::checkpointable() const {
  return std::all_of(chunks_.begin(), chunks_.end(),
                     [](const Chunk& c) { return c.weights->keeps_checkpoint_state(); });
}

std::vector<int> StageExecutor::checkpointed_versions(const Chunk& chunk, int64_t step) const {
  return schedule::checkpointed_versions(config_, chunk.stage, step);
}

std::vector<torch::Tensor> StageExecutor::held_weights() const {
  std::vector<torch::Tensor> held;
  for (const auto& chunk : chunks_) {
    for (const auto& p : chunk.model->parameters()) held.push_back(p);
  }
  for (const auto& chunk : chunks_) {
    const auto more = chunk.weights->held_tensors();
    held.insert(held.end(), more.begin(), more.end());
  }
  return held;
}

std::vector<int> StageExecutor::peak_weight_copies() const {
  std::vector<int> peaks;
  for (const auto& chunk : chunks_) peaks.push_back(chunk.weights->peak_copies());
  return peaks;
}

}  // namespace pipetrain::runtime
