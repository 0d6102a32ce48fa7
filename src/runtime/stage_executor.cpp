#include "runtime/stage_executor.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "train/lr_schedule.h"
#include "train/optim.h"

namespace pipetrain::runtime {
namespace {

using schedule::ActionKind;

// Tags name the stage boundary and microbatch, so a mismatched pair (or two chunks of the same
// worker pair) never silently exchange the wrong tensor. Boundary b is between stages b, b+1.
int activation_tag(int boundary, int microbatch, int m) { return 2 * (boundary * m + microbatch); }
int gradient_tag(int boundary, int microbatch, int m) { return activation_tag(boundary, microbatch, m) + 1; }
constexpr int kEvalTagBase = 1 << 24;

}  // namespace

StageExecutor::StageExecutor(const Config& config, const TextDataset* data, Comm& comm,
                             Layout layout, CommGroups groups,
                             const std::vector<StageRange>& ranges, schedule::Schedule schedule)
    : config_(config),
      data_(data),
      comm_(comm),
      layout_(layout),
      groups_(groups),
      schedule_(std::move(schedule)),
      slices_(token_slices_of(config)) {
  std::vector<torch::Tensor> params;
  const int stages = layout_.stages();
  const std::string head_copy = fmt::format("layer{}.tied_weight", config.model.layers + 1);
  for (int c = 0; c < layout_.chunks; ++c) {
    const int stage = layout_.stage_of(c);
    const StageRange range = ranges.at(size_t(stage));
    auto model = std::make_shared<GptStack>(gpt_config_from(config.model),
                                            static_cast<uint64_t>(config.train.seed),
                                            range.first, range.last);
    for (const auto& item : model->named_parameters()) {
      params.push_back(item.value());
      if (stages > 1 && is_first_stage(stage) && item.key() == "layer0.token_weight") {
        tied_weight_ = item.value();
      }
      if (stages > 1 && is_last_stage(stage) && item.key() == head_copy) {
        tied_weight_ = item.value();
        continue;  // the tied weight enters the global norm once, on the first stage
      }
      norm_params_.push_back(item.value());
    }
    chunks_.push_back({stage, model});
    recompute_.push_back(recomputes_stage(config.pipeline.recompute, stage, stages));
  }
  // One optimizer over every chunk: Adam's state is per parameter, so this equals the Trainer's.
  if (config.pipeline.zero1 == 1) {
    zero1_ = std::make_unique<Zero1Optimizer>(params, config.train, comm_, groups_.replicas,
                                              layout_.replica(), layout_.replicas);
  } else {
    optimizer_ = make_optimizer(params, config.train);
  }
}

std::vector<std::pair<std::string, torch::Tensor>> StageExecutor::optimizer_state(
    torch::nn::Module& chunk) {
  return zero1_ ? zero1_->state_tensors(chunk) : optimizer_state_tensors(*optimizer_, chunk);
}

std::vector<int64_t> StageExecutor::activation_shape(int64_t rows, int slice) const {
  const int64_t tokens = slice < 0 ? config_.model.seq_len : slices_.lengths.at(size_t(slice));
  return {rows, tokens, config_.model.d_model};
}

// Each replica takes batch_size / w rows of the global batch, split into m microbatches.
int64_t StageExecutor::micro_rows() const {
  return config_.train.batch_size / (layout_.replicas * config_.train.microbatches);
}

StepResult StageExecutor::train_step(int64_t step) {
  const auto& train = config_.train;
  TokenBatch batch;
  if (data_ != nullptr) batch = data_->train_batch(uint64_t(train.seed), step, train.batch_size);
  current_step_ = step;
  zero1_ ? zero1_->zero_grad() : optimizer_->zero_grad();
  loss_sum_ = 0;
  steps_pending_ = 0;
  result_ = StepResult{};
  for (const auto& action : schedule_.actions.at(size_t(layout_.worker()))) {
    const auto start = std::chrono::steady_clock::now();
    run_action(action, batch);
    if (step >= traced_steps) continue;
    const auto ms = [](std::chrono::steady_clock::time_point t) {
      return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
    };
    const double begin = ms(start);
    const std::string slice = slices_.count() > 1 ? fmt::format(".{}", action.slice) : "";
    events_.push_back({fmt::format("{}{}{}{}", layout_.stage_of(action.chunk),
                                   schedule::kind_token(action.kind), action.microbatch, slice),
                       std::string(schedule::kind_name(action.kind)), begin,
                       ms(std::chrono::steady_clock::now()) - begin, action.microbatch});
  }
  if (!in_flight_.empty() || !kv_caches_.empty()) {
    throw std::logic_error("schedule left microbatches in flight");
  }
  if (steps_pending_ != 0) throw std::logic_error("schedule left a chunk without its update");
  const bool last = layout_.holds_last_stage();
  const double replicas_loss =
      last && groups_.replicas >= 0 ? comm_.all_reduce_sum(loss_sum_, groups_.replicas) : loss_sum_;
  result_.loss = last ? replicas_loss / double(train.microbatches * layout_.replicas)
                      : std::numeric_limits<double>::quiet_NaN();
  return result_;
}

void StageExecutor::run_action(const schedule::Action& action, const TokenBatch& batch) {
  const int mb = action.microbatch, chunk = action.chunk, m = int(config_.train.microbatches);
  const int stage = layout_.stage_of(chunk);
  const Key key{chunk, mb, action.slice};
  // Token slices travel as units of their own: (microbatch, slice) numbered slice-minor.
  const int unit = mb * slices_.count() + action.slice, units = m * slices_.count();
  switch (action.kind) {
    case ActionKind::Forward:
      return forward(key, batch);
    case ActionKind::Backward:
      return backward(key);
    case ActionKind::SendActivation:
      comm_.send(in_flight_.at(key).output, peer_rank(action.peer), activation_tag(stage, unit, units));
      // Recomputed chunks rebuild their output in backward; the send keeps its own reference.
      if (recompute_.at(size_t(chunk))) in_flight_.at(key).output = torch::Tensor();
      return;
    case ActionKind::RecvActivation:
      in_flight_[key].input = comm_.recv(activation_shape(micro_rows(), action.slice), torch::kFloat32,
                                         peer_rank(action.peer), activation_tag(stage - 1, unit, units));
      return;
    case ActionKind::SendGrad: {
      // The input gradient leaves the chunk: this microbatch's activations can go.
      auto grad = in_flight_.at(key).input.grad();
      in_flight_.erase(key);
      return comm_.send(grad, peer_rank(action.peer), gradient_tag(stage - 1, unit, units));
    }
    case ActionKind::RecvGrad:
      in_flight_.at(key).output_grad = comm_.recv(activation_shape(micro_rows(), action.slice), torch::kFloat32,
                                                  peer_rank(action.peer), gradient_tag(stage, unit, units));
      return;
    case ActionKind::AllReduceGrads:
      return all_reduce_chunk_grads(chunk);
    case ActionKind::OptimizerStep:
      // One OptimizerStep per chunk, but the global norm needs every chunk's gradient first:
      // the update runs once, at the worker's last one.
      if (++steps_pending_ == layout_.chunks) {
        steps_pending_ = 0;
        optimizer_step();
      }
      return;
    default:
      fail("the runtime cannot execute {} actions yet (schedule '{}')",
           schedule::kind_name(action.kind), schedule_.name);
  }
}

void StageExecutor::forward(const Key& key, const TokenBatch& batch) {
  const auto [chunk, microbatch, slice] = key;
  const int64_t rows = micro_rows();
  const int stage = layout_.stage_of(chunk);
  InFlight& state = in_flight_[key];
  TokenBatch micro;
  const int64_t replica_offset = layout_.replica() * rows * config_.train.microbatches;
  if (data_ != nullptr) micro = batch.rows(replica_offset + microbatch * rows, rows);
  const int64_t slice_start = slices_.starts.at(size_t(slice));
  const int64_t slice_end = slice_start + slices_.lengths.at(size_t(slice));
  const auto tokens_of_slice = [&](const std::vector<int64_t>& tokens) {
    return to_tensor(tokens, rows, micro.seq_len).slice(1, slice_start, slice_end);
  };
  if (is_first_stage(stage)) {
    state.input = tokens_of_slice(micro.inputs);
  } else {
    state.input.requires_grad_(true);
  }
  if (is_last_stage(stage)) state.targets = tokens_of_slice(micro.targets);
  // Recomputation: run the forward without a graph and keep only the input; backward runs it
  // again with the graph (same weights, no randomness: the same values).
  std::optional<torch::NoGradGuard> no_graph;
  if (recompute_.at(size_t(chunk))) no_graph.emplace();
  forward_with_graph(key, state);
  if (is_last_stage(stage)) loss_sum_ += state.loss_value;
}

// Output (sent on) or, on the last stage, the scaled loss: the tensors backward starts from.
void StageExecutor::forward_with_graph(const Key& key, InFlight& state) {
  const auto [chunk, microbatch, slice] = key;
  auto& model = *chunks_.at(size_t(chunk)).model;
  auto output = slices_.count() == 1
                    ? model.forward(state.input)
                    : model.forward_slice(state.input, slices_.starts.at(size_t(slice)),
                                          kv_caches_[{chunk, microbatch}]);
  if (is_last_stage(layout_.stage_of(chunk))) {
    // A token slice's loss is its share (slice tokens / sequence tokens) of the microbatch mean.
    const double share = double(state.targets.size(1)) / double(config_.model.seq_len);
    auto loss = lm_loss(output, state.targets);
    state.loss_value = loss.item<double>() * share;
    // The replicas' gradients are summed, so each microbatch carries 1 / (m w) of the global
    // mean: exactly the Trainer's gradient of the mean over the whole batch.
    state.scaled_loss = loss * share / double(config_.train.microbatches * layout_.replicas);
  } else {
    state.output = output;
  }
}

void StageExecutor::backward(const Key& key) {
  const auto [chunk, microbatch, slice] = key;
  InFlight& state = in_flight_.at(key);
  const int stage = layout_.stage_of(chunk);
  if (recompute_.at(size_t(chunk))) forward_with_graph(key, state);
  std::vector<torch::Tensor> roots, grads;
  if (is_last_stage(stage)) {
    roots = {state.scaled_loss};
    grads = {torch::ones_like(state.scaled_loss)};
  } else {
    roots = {state.output};
    grads = {state.output_grad};
  }
  // Token slices: the later slices' K/V gradients enter this slice's graph with its output's.
  const auto cache = kv_caches_.find({chunk, microbatch});
  if (cache != kv_caches_.end()) {
    cache->second.add_backward_roots(slice, roots, grads);
    if (slice == 0) kv_caches_.erase(cache);  // slices run backward in reverse: the last one
  }
  torch::autograd::backward(roots, grads);
  state.output = torch::Tensor();
  state.scaled_loss = torch::Tensor();
  if (is_first_stage(stage)) in_flight_.erase(key);  // nothing to send upstream
}

// Sum of the chunk's gradients over its replicas, in one flat buffer (one Gloo call).
void StageExecutor::all_reduce_chunk_grads(int chunk) {
  if (groups_.replicas < 0) return;
  auto params = chunks_.at(size_t(chunk)).model->parameters();
  std::vector<torch::Tensor> parts;
  for (const auto& p : params) {
    parts.push_back(p.grad().defined() ? p.grad().reshape({-1}) : torch::zeros({p.numel()}));
  }
  auto flat = torch::cat(parts);
  comm_.all_reduce_sum(flat, groups_.replicas);
  int64_t offset = 0;
  for (auto& p : params) {
    auto reduced = flat.slice(0, offset, offset + p.numel()).view_as(p);
    // Copied, not aliased: zero_grad detaches gradients in place, which views forbid.
    if (p.grad().defined()) {
      p.mutable_grad().copy_(reduced);
    } else {
      p.mutable_grad() = reduced.clone();
    }
    offset += p.numel();
  }
}

void StageExecutor::optimizer_step() {
  comm_.wait_sends();
  // The tied embedding/head weight: both copies get the summed gradient (after the replica
  // all-reduce, so the sum covers every replica), and identical updates keep them equal.
  if (tied_weight_.defined()) comm_.all_reduce_sum(tied_weight_.mutable_grad(), groups_.tied);
  // After the replica all-reduce every replica holds the same gradients: the norm is summed
  // over one replica's pipeline only.
  const double global_norm =
      std::sqrt(comm_.all_reduce_sum(squared_grad_norm(norm_params_), groups_.pipeline));
  std::vector<torch::Tensor> params;
  for (const auto& chunk : chunks_) {
    for (auto& p : chunk.model->parameters()) params.push_back(p);
  }
  scale_grads_to_norm(params, global_norm, config_.train.grad_clip);
  result_.grad_norm = global_norm;
  result_.lr = learning_rate_at(config_.train, current_step_);
  if (zero1_) return zero1_->step(result_.lr);  // this replica's shard, then all-gather
  set_learning_rate(*optimizer_, result_.lr);
  optimizer_->step();
}

double StageExecutor::evaluate() {
  const double none = std::numeric_limits<double>::quiet_NaN();
  if (layout_.replica() != 0) return none;  // the replicas hold the same weights
  torch::NoGradGuard no_grad;
  const int64_t rows = config_.train.batch_size;
  const int stages = layout_.stages();
  double total = 0;
  for (int64_t i = 0; i < config_.eval.batches; ++i) {
    TokenBatch batch;
    if (data_ != nullptr) batch = data_->val_batch(i, rows);
    // The chunks in stage order: with looping placement the batch visits this worker v times.
    for (const auto& chunk : chunks_) {
      const int s = chunk.stage;
      const int tag_before = kEvalTagBase + int(i) * stages + s - 1;
      auto input = is_first_stage(s)
                       ? to_tensor(batch.inputs, rows, batch.seq_len)
                       : comm_.recv(activation_shape(rows), torch::kFloat32,
                                    peer_rank((s - 1) % layout_.workers), tag_before);
      auto output = chunk.model->forward(input);
      if (is_last_stage(s)) {
        total += lm_loss(output, to_tensor(batch.targets, rows, batch.seq_len)).item<double>();
      } else {
        comm_.send(output, peer_rank((s + 1) % layout_.workers), tag_before + 1);
        comm_.wait_sends();
      }
    }
  }
  return layout_.holds_last_stage() ? total / double(config_.eval.batches) : none;
}

}  // namespace pipetrain::runtime
