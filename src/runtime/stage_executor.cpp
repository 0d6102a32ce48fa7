#include "runtime/stage_executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>

#include <ATen/Parallel.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "device/placement.h"
#include "model/registry.h"
#include "runtime/stop_votes.h"
#include "schedule/run_rules.h"
#include "schedule/steps.h"
#include "train/evaluation.h"
#include "train/checkpoint.h"
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

void overwrite_buffer(const torch::Tensor& buffer, const torch::Tensor& value) {
  torch::NoGradGuard no_grad;
  buffer.data().copy_(value);
}

KeepBuffers::KeepBuffers(torch::nn::Module& module) {
  for (const auto& buffer : module.buffers()) saved_.emplace_back(buffer, buffer.clone());
}

KeepBuffers::~KeepBuffers() {
  for (const auto& [buffer, value] : saved_) overwrite_buffer(buffer, value);
}

StageExecutor::StageExecutor(const Config& config, const RunSpec& spec, const BatchSource* data,
                             Comm& comm, const c10::Device& device, Layout layout, CommGroups groups,
                             schedule::StepLists lists)
    : config_(config),
      model_(make_model(config)),
      ranges_(spec.ranges),
      data_(data),
      comm_(comm),
      device_(device),
      layout_(layout),
      groups_(groups),
      lists_(std::move(lists)),
      slices_(spec.slices),
      loss_scale_(device::precision_of(spec.execution.precision), config.train),
      schedule_entry_(*spec.schedule),
      clock_(std::make_unique<device::EventClock>(device)) {
  const auto shared = model_->shared_parameters();
  shared_copies_.resize(shared.size());
  shared_in_norm_.assign(shared.size(), false);
  std::vector<std::pair<std::string, torch::Tensor>> named_params;  // Muon tells matrices by name
  for (int c = 0; c < layout_.chunks; ++c) {
    const int stage = layout_.stage_of(c);
    add_chunk(stage, spec.recompute.at(size_t(stage)), shared, named_params);
  }
  std::vector<torch::Tensor> params;
  for (const auto& named : named_params) params.push_back(named.second);
  // One optimizer over every chunk: Adam's state is per parameter, so this equals the Trainer's.
  if (config.pipeline.zero1 == 1) {
    zero1_ = std::make_unique<Zero1Optimizer>(params, config.train, comm_, groups_.replicas,
                                              layout_.replica(), layout_.replicas);
  } else {
    optimizer_ = make_optimizer(named_params, config.train, roles_of(*model_));
  }
  step_params_ = params;
  microbatches_per_update_ = schedule::updates_per_microbatch(lists_.schedule().policy.kind)
                                 ? 1
                                 : int(config_.train.microbatches);
  if (2LL * layout_.stages() * tag_window() >= kEvalTagBase) {
    fail("{} stages x {} microbatches x {} token slices: too many messages in flight to tag",
         layout_.stages(), config_.train.microbatches, slices_.count());
  }
  count_readers_through(0);
  pass_graphs_ = device::make_pass_graphs(spec.execution, device_);
}

// The stage's module on the device and its weight versions; its parameters (the versions' the
// optimizer updates) appended to `named_params`, to their shared groups, and to the global
// norm, which counts a shared parameter once, as its first copy.
void StageExecutor::add_chunk(int stage, bool recompute, const std::vector<SharedParameter>& shared,
                              std::vector<std::pair<std::string, torch::Tensor>>& named_params) {
  const StageRange range = ranges_.at(size_t(stage));
  auto model = model_->make_stage(range.first, range.last);
  model->to(device_);  // before the weight versions and the optimizer hold its parameters
  // No-flush policies: the optimizer updates the masters, graphs read the module's tensors.
  std::shared_ptr<WeightVersions> weights =
      make_weight_versions(lists_.schedule().policy, lists_.iterations(), stage, model->parameters(),
                           schedule::checkpointed_versions(config_, stage, config_.train.steps));
  const std::vector<torch::Tensor>& updated = weights->optimized();
  const auto secondary = secondary_copies(*model_);
  size_t index = 0;
  for (const auto& item : model->named_parameters()) {
    const torch::Tensor& param = updated.at(index++);
    named_params.emplace_back(item.key(), param);
    const bool first_copy = std::count(secondary.begin(), secondary.end(), item.key()) == 0;
    for (size_t g = 0; g < shared.size(); ++g) {
      for (const auto& copy : shared[g].copies) {
        if (copy.name != item.key()) continue;
        shared_copies_[g].push_back(param);
        if (first_copy) shared_in_norm_[g] = true;
      }
    }
    if (first_copy) norm_params_.push_back(param);
  }
  chunks_.push_back({stage, model, weights});
  recompute_.push_back(recompute);
}

std::vector<schedule::Action> StageExecutor::actions_of(int64_t step, int worker) const {
  if (worker < 0) worker = layout_.worker();
  const int k = int(step - list_start(step));
  return step == resumed_at_ && step > 0 ? lists_.resumed_step(worker, k) : lists_.step(worker, k);
}

std::vector<std::vector<schedule::Action>> StageExecutor::readers_ahead_of(int64_t step) {
  std::vector<std::vector<schedule::Action>> by_chunk(chunks_.size());
  const int64_t last = std::min<int64_t>(step + lists_.reader_span(), lists_.iterations() - 1);
  for (int64_t k = std::max(step, readers_counted_to_ + 1); k <= last; ++k) {
    for (const auto& a : actions_of(k)) by_chunk.at(size_t(a.chunk)).push_back(a);
  }
  readers_counted_to_ = std::max(readers_counted_to_, last);
  return by_chunk;
}

void StageExecutor::count_readers_through(int64_t step) {
  if (flushes()) return;  // one version: nothing to count
  const auto by_chunk = readers_ahead_of(step);
  for (size_t c = 0; c < chunks_.size(); ++c) chunks_[c].weights->count_readers(by_chunk[c]);
}

const Microbatch& StageExecutor::batch_of(int64_t step) {
  auto it = batches_.find(step);
  if (it != batches_.end()) return it->second;
  while (!batches_.empty() && batches_.begin()->first < step - 1) batches_.erase(batches_.begin());
  Microbatch batch;
  const auto& train = config_.train;
  if (data_ != nullptr) {
    batch = on_device(data_->train_batch(uint64_t(train.seed), step, train.batch_size), device_);
  }
  return batches_.emplace(step, std::move(batch)).first->second;
}

TensorSpec StageExecutor::activation_spec(int stage, int64_t rows, int slice) const {
  TensorSpec spec = model_->boundary_spec(ranges_.at(size_t(stage)).first, rows);
  if (slice >= 0 && slices_.count() > 1) spec.shape.at(1) = slices_.lengths.at(size_t(slice));
  return spec;
}

int64_t StageExecutor::micro_rows() const { return microbatch_rows_of(config_); }

StepResult StageExecutor::train_step(int64_t step) {
  begin_step(step);
  const int64_t first_send = comm_.next_send_ticket();
  run_step_actions(step, actions_of(step));
  end_step(step, first_send);
  result_.loss = step_loss(step);
  return result_;
}

void StageExecutor::begin_step(int64_t step) {
  current_step_ = step;
  // A step's gradients add up from zero. (No-flush policies have already moved theirs to the
  // masters at each update, and the optimizer clears only the masters: the gradients a run-on
  // already added for the next iteration stay in the module's parameters.)
  zero_gradients();
  steps_pending_ = 0;
  result_ = StepResult{};
  for (auto& chunk : chunks_) {
    chunk.weights->release_held();  // the checkpoint, if any, is done
    chunk.weights->begin_step(step, checkpoint_may_follow_);
  }
  count_readers_through(step);
  if (pass_graphs_ && !pass_graphs_tried_ && step >= resumed_at_ + pass_graphs_->eager_steps()) {
    prepare_pass_graphs(step);
    // The capture's allocations are the pools, counted whole from here on (graph_pool_bytes).
    if (memory_watch_) memory_watch_->begin_step();
    else device::reset_peak_memory(device_);
  }
}

void StageExecutor::run_step_actions(int64_t step, const std::vector<schedule::Action>& actions) {
  const size_t end = actions.size();
  const auto released = sends_released_in(step);
  size_t last_update = end;  // the run-on follows it (no-flush)
  for (size_t k = 0; k < end; ++k) {
    if (actions[k].kind == ActionKind::OptimizerStep) last_update = k;
  }
  for (size_t k = 0; k < end; ++k) {
    const auto& action = actions[k];
    if (comm_.matches_by_tag()) post_next_receive(actions, k + 1, end);  // (NCCL: in list order)
    const int stage = layout_.stage_of(action.chunk);
    if (pending_update_ && schedule::needs_update_done(action, pending_update_->version)) {
      finish_update(stage, step);
    }
    if (schedule::is_compute(action.kind)) finish_running_statistics(action.chunk, stage);
    const size_t start = trace_mark();
    // No-flush: the first stages run ahead into the next step's microbatches.
    const int64_t ticket = comm_.next_send_ticket();
    run_action(action, batch_of(list_start(step) + action.iteration));
    track_transfer(action, ticket, released[k]);
    if (k == last_update && !flushes()) {
      for (auto& chunk : chunks_) chunk.weights->hold_releases();
    }
    const std::string slice = slices_.count() > 1 ? fmt::format(".{}", action.slice) : "";
    trace({fmt::format("{}{}{}{}", stage, schedule::kind_token(action.kind), action.microbatch, slice),
           std::string(schedule::kind_name(action.kind)), 0, 0, action.microbatch, int(step)},
          start);
    if (pending_update_ && flushes()) finish_update(stage, step);
  }
}

// The step's last update, running statistics and trace; its sends waited for as far as its
// receivers can be behind (`first_send`: the step's first ticket); the schedule's bookkeeping
// checked.
void StageExecutor::end_step(int64_t step, int64_t first_send) {
  if (pending_update_) finish_update(layout_.stage_of(0), step);
  // (A no-flush run-on may end with the next update's replica sum posted: it stays in flight.)
  for (int c = 0; c < layout_.chunks; ++c) finish_running_statistics(c, layout_.stage_of(c));
  resolve_trace();
  const bool list_done = flushes() || step + 1 == lists_.iterations();
  if (list_done) {  // (a flush: its sends were done at the update)
    comm_.wait_sends();
    sent_messages_.forget_before(comm_.next_send_ticket());
    point_at_latest_weights();
  } else {
    // No-flush: not at each update, nor this step's sends: their receivers may still be behind.
    comm_.wait_sends_before(first_send);
    sent_messages_.forget_before(first_send);
  }
  if (list_done && (!in_flight_.empty() || !kv_caches_.empty()))
    throw std::logic_error("schedule left microbatches in flight");
  if (steps_pending_ != 0) throw std::logic_error("schedule left a chunk without its update");
}

// The step's mean loss over its microbatches and replicas (NaN off the last stage).
double StageExecutor::step_loss(int64_t step) {
  const auto losses = loss_by_iteration_.extract(int(step - list_start(step)));
  const double loss_sum = losses.empty() ? 0.0 : losses.mapped().item<double>();
  if (!layout_.holds_last_stage()) return std::numeric_limits<double>::quiet_NaN();
  const double replicas_loss = groups_.replicas >= 0 ? comm_.all_reduce_sum(loss_sum, groups_.replicas) : loss_sum;
  return replicas_loss / double(config_.train.microbatches * layout_.replicas);
}

// What a stage sends must be what its receiver expects (Model::boundary_spec): a transfer of
// another size would fail inside the transport or fill the receiver's tensor with other rows.
void StageExecutor::check_sent_shape(const torch::Tensor& output, int stage, int64_t rows, int slice) const {
  const TensorSpec expected = activation_spec(stage + 1, rows, slice);
  if (output.sizes() == c10::IntArrayRef(expected.shape) && output.scalar_type() == expected.dtype) return;
  const StageRange range = ranges_.at(size_t(stage));
  fail("stage {} (layers {}-{}) gave an output of shape [{}] ({}) for a microbatch of {} rows, where "
       "stage {} takes [{}] ({}): the model's layers must give each row an output of one shape",
       stage, range.first, range.last - 1, fmt::join(output.sizes(), ", "), c10::toString(output.scalar_type()),
       rows, stage + 1, fmt::join(expected.shape, ", "), c10::toString(expected.dtype));
}

// Units are counted modulo a window of stages + 4 iterations: more than a pair of workers ever
// has in flight (a step runs at most `stages` iterations ahead), so a long run's tags stay small.
int StageExecutor::tag_window() const {
  const int per_iteration = int(config_.train.microbatches) * slices_.count();
  return std::min(lists_.total_microbatches() * slices_.count(), per_iteration * (layout_.stages() + 4));
}

size_t StageExecutor::trace_mark() {
  if (current_step_ >= traced_steps) return 0;
  if (memory_watch_) memory_watch_->begin_action();
  return clock_->mark();
}

void StageExecutor::trace(sim::TimedEvent event, size_t start_mark) {
  if (event.step >= traced_steps) return;
  const size_t end = clock_->mark();
  if (memory_watch_) {
    const ActionMemory memory = memory_watch_->end_action(graph_pool_bytes());
    event.memory_peak_bytes = memory.peak;
    event.memory_live_bytes = memory.live;
  }
  pending_trace_.push_back({std::move(event), start_mark, end});
}

void StageExecutor::resolve_trace() {
  if (pending_trace_.empty()) return;
  const std::vector<double> times = clock_->resolve();
  for (auto& pending : pending_trace_) {
    pending.event.start_ms = times.at(pending.start);
    pending.event.duration_ms = times.at(pending.end) - pending.event.start_ms;
    events_.push_back(std::move(pending.event));
  }
  pending_trace_.clear();
}

std::vector<std::optional<schedule::Message>> StageExecutor::sends_released_in(int64_t step) const {
  const schedule::Schedule& schedule = lists_.schedule();
  std::vector<std::vector<schedule::Action>> lists;
  for (int worker = 0; worker < schedule.workers; ++worker) lists.push_back(actions_of(step, worker));
  return schedule::sends_released_by_receives(schedule, layout_.worker(), lists);
}

// A send's ticket, by its message; a receive lets go of the sends its peer has taken.
void StageExecutor::track_transfer(const schedule::Action& action, int64_t ticket,
                                   const std::optional<schedule::Message>& released) {
  if (schedule::is_send(action.kind)) {
    const auto message = schedule::message_of(lists_.schedule(), layout_.worker(), action);
    sent_messages_.sent(*message, ticket, peer_rank(action.peer));
  } else if (schedule::is_recv(action.kind)) {
    sent_messages_.release(released, comm_);
  }
}

// Token slices travel as units of their own: (microbatch, slice) numbered slice-minor, counted
// over the whole list (no-flush lists span every step), within the tag window. A message's tag
// names the boundary it crosses by the lower stage of the two; sender and receiver each compute
// it from their own action, here, so they agree by construction.
int StageExecutor::message_tag(const schedule::Action& action) const {
  const int stage = layout_.stage_of(action.chunk), units = tag_window();
  const int unit = (lists_.schedule().global_microbatch(action) * slices_.count() + action.slice) % units;
  switch (action.kind) {
    case ActionKind::SendActivation: return activation_tag(stage, unit, units);
    case ActionKind::RecvActivation: return activation_tag(stage - 1, unit, units);
    case ActionKind::SendGrad: return gradient_tag(stage - 1, unit, units);
    case ActionKind::RecvGrad: return gradient_tag(stage, unit, units);
    default: fail("{} actions carry no message", schedule::kind_name(action.kind));
  }
}

StageExecutor::RecvRequest StageExecutor::recv_request(const schedule::Action& action) const {
  const int stage = layout_.stage_of(action.chunk);
  const int receiver = action.kind == ActionKind::RecvActivation ? stage : stage + 1;
  return {activation_spec(receiver, micro_rows(), action.slice), peer_rank(action.peer), message_tag(action)};
}

void StageExecutor::post_next_receive(const std::vector<schedule::Action>& actions, size_t from,
                                      size_t end) {
  for (size_t j = from; j < end; ++j) {
    const auto& next = actions[j];
    if (next.kind != ActionKind::RecvActivation && next.kind != ActionKind::RecvGrad) continue;
    const RecvRequest r = recv_request(next);
    if (!posted_receives_.count({r.peer, r.tag})) {
      posted_receives_[{r.peer, r.tag}] =
          comm_.post_recv(r.spec.shape, r.spec.dtype, r.peer, r.tag);
    }
    return;
  }
}

torch::Tensor StageExecutor::receive(const schedule::Action& action) {
  const RecvRequest r = recv_request(action);
  const auto posted = posted_receives_.find({r.peer, r.tag});
  if (posted == posted_receives_.end()) {
    return comm_.recv(r.spec.shape, r.spec.dtype, r.peer, r.tag);
  }
  const int handle = posted->second;
  posted_receives_.erase(posted);
  return comm_.take_recv(handle);
}

void StageExecutor::run_action(const schedule::Action& action, const Microbatch& batch) {
  // Keys and tags count microbatches over the whole list (no-flush lists span every step).
  const Key key{action.chunk, lists_.schedule().global_microbatch(action), action.slice};
  if (schedule::is_compute(action.kind)) return compute(action, key, batch);
  switch (action.kind) {
    case ActionKind::SendActivation:
      return send_activation(action, key);
    case ActionKind::RecvActivation:
      in_flight_[key].input = receive(action);
      return;
    case ActionKind::SendGrad:
      return send_gradient(action, key);
    case ActionKind::RecvGrad:
      in_flight_.at(key).output_grad = receive(action);
      return;
    case ActionKind::AllReduceGrads:
      return post_replica_sums(action.chunk);
    case ActionKind::OptimizerStep:
      // One OptimizerStep per chunk, but the global norm needs every chunk's gradient first:
      // the update runs once, at the worker's last one.
      if (++steps_pending_ == layout_.chunks) {
        steps_pending_ = 0;
        begin_update(action.version);
      }
      return;
    default:
      fail("the runtime cannot execute {} actions yet (schedule '{}')",
           schedule::kind_name(action.kind), lists_.schedule().name);
  }
}

// A forward or backward pass, between its weight version's before and after (2BW, PipeDream
// and prediction swap the chunk's weights around it).
void StageExecutor::compute(const schedule::Action& action, const Key& key, const Microbatch& batch) {
  WeightVersions& weights = *chunks_.at(size_t(action.chunk)).weights;
  weights.before_compute(action, optimizer());
  switch (action.kind) {
    case ActionKind::Forward:
      forward(key, action.microbatch, batch, action.version);
      // Per iteration: a no-flush step also runs forwards of the next one.
      if (is_last_stage(layout_.stage_of(action.chunk))) {
        auto& sum = loss_by_iteration_[action.iteration];
        const auto& value = in_flight_.at(key).loss_value;
        sum = sum.defined() ? sum + value : value;
      } else {
        hand_activation_over(key);
      }
      break;
    case ActionKind::Backward:
      backward(key);
      hand_gradient_over(key);
      break;
    case ActionKind::BackwardInput:
      backward_input(key);
      hand_gradient_over(key);
      break;
    default:  // BackwardWeight (is_compute)
      backward_weight(key);
      break;
  }
  weights.after_compute(action);
}

void StageExecutor::send_activation(const schedule::Action& action, const Key& key) {
  InFlight& state = in_flight_.at(key);
  check_sent_shape(state.output, layout_.stage_of(action.chunk), micro_rows(), action.slice);
  comm_.send(state.output, peer_rank(action.peer), message_tag(action));
  // Recomputed chunks rebuild their output in backward; the send keeps its own reference.
  if (recompute_.at(size_t(action.chunk))) state.output = torch::Tensor();
}

// The input gradient leaves the chunk: this microbatch's activations can go (after its weight
// pass, under zero-bubble).
void StageExecutor::send_gradient(const schedule::Action& action, const Key& key) {
  InFlight& state = in_flight_.at(key);
  auto grad = state.input.grad();
  state.input.mutable_grad() = torch::Tensor();  // a pending W needs only what B recorded
  state.grad_sent = true;
  drop_if_done(key);  // may erase `state`
  comm_.send(grad, peer_rank(action.peer), message_tag(action));
}

// A V placement's turn (stages p-1 and p both on worker p-1): the next stage is this worker's
// other chunk, whose input is this output, as a fresh leaf like a received one; the schedule has
// no send for it. (Recomputed chunks rebuild their output in backward.)
void StageExecutor::hand_activation_over(const Key& key) {
  const auto [chunk, microbatch, slice] = key;
  const int next_stage = layout_.stage_of(chunk) + 1;
  if (!layout_.holds_stage(next_stage)) return;  // it is sent
  InFlight& state = in_flight_.at(key);
  const int next_chunk = layout_.chunk_of_stage(next_stage);
  in_flight_[{next_chunk, microbatch, slice}].input = state.output.detach();
  if (recompute_.at(size_t(chunk))) state.output = torch::Tensor();
}

// The turn backwards: the input gradient is the previous stage's (this worker's other chunk)
// output gradient; this microbatch's activations can go as after a SendGrad.
void StageExecutor::hand_gradient_over(const Key& key) {
  const auto [chunk, microbatch, slice] = key;
  const int stage = layout_.stage_of(chunk);
  if (is_first_stage(stage) || !layout_.holds_stage(stage - 1)) return;  // none, or it is sent
  InFlight& state = in_flight_.at(key);
  const int previous_chunk = layout_.chunk_of_stage(stage - 1);
  in_flight_.at({previous_chunk, microbatch, slice}).output_grad = state.input.grad();
  state.input.mutable_grad() = torch::Tensor();
  state.grad_sent = true;
  drop_if_done(key);
}

// key's microbatch counts over the whole action list; `microbatch` is its index in its step.
void StageExecutor::forward(const Key& key, int microbatch, const Microbatch& batch, int version) {
  const auto [chunk, key_microbatch, slice] = key;
  const int64_t rows = micro_rows();
  const int stage = layout_.stage_of(chunk);
  InFlight& state = in_flight_[key];
  Microbatch micro;
  if (data_ != nullptr) micro = replica_microbatch(batch, layout_.replica(), microbatch, config_.train.microbatches, rows);
  const int64_t slice_start = slices_.starts.at(size_t(slice));
  const int64_t slice_end = slice_start + slices_.lengths.at(size_t(slice));
  const auto slice_of = [&](const torch::Tensor& whole) {  // token slices: the sequence is dim 1
    return slices_.count() == 1 ? whole : whole.slice(1, slice_start, slice_end);
  };
  if (is_first_stage(stage)) {
    state.input = slice_of(micro.inputs);
  } else {
    state.input.requires_grad_(true);
  }
  if (is_last_stage(stage)) {
    state.targets = slice_of(micro.labels);
    state.loss_scale = loss_scale_.scale_at(run_version(version));
  }
  if (pass_graphs_ready_) return forward_graphed(key, state);
  // Recomputation: run the forward without a graph and keep only the input; backward runs it
  // again with the graph (same weights, no randomness: the same values).
  std::optional<torch::NoGradGuard> no_graph;
  if (recompute_.at(size_t(chunk))) no_graph.emplace();
  forward_with_graph(key, state);
}

// Output (sent on) or, on the last stage, the scaled loss: the tensors backward starts from.
void StageExecutor::forward_with_graph(const Key& key, InFlight& state) {
  const auto [chunk, microbatch, slice] = key;
  const bool last = is_last_stage(layout_.stage_of(chunk));
  SequenceKvCache* cache = slices_.count() == 1 ? nullptr : &kv_caches_[{chunk, microbatch}];
  const torch::Tensor scale =
      last && loss_scale_.active() ? loss_scale_tensor(state.loss_scale) : torch::Tensor();
  auto [root, loss] = chunk_forward(*chunks_.at(size_t(chunk)).model, last, slice, state.input,
                                    state.targets, cache, scale);
  if (last) {
    state.scaled_loss = root;
    state.loss_value = loss;
  } else {
    state.output = root;
  }
}

// The eager and the graphed forward (stage_graphs.cpp) alike: the same operations, the same bits.
std::pair<torch::Tensor, torch::Tensor> StageExecutor::chunk_forward(
    StageModule& model, bool last, int slice, const torch::Tensor& input,
    const torch::Tensor& targets, SequenceKvCache* cache, const torch::Tensor& scale) const {
  auto output = cache == nullptr ? model.forward(input)
                                 : model.token_sliced()->forward_slice(
                                       input, slices_.starts.at(size_t(slice)), *cache);
  if (!last) return {output, torch::Tensor()};
  // A token slice's loss is its share of the microbatch mean.
  const double share = slice_share(slice);
  const auto loss = model.loss(output, targets);
  torch::Tensor scaled_loss = update_share(loss, share);
  // Float16: times the loss scale (a power of two: exact), so small gradients survive.
  if (scale.defined()) scaled_loss = scaled_loss * scale;
  return {scaled_loss, loss.detach().to(torch::kFloat64) * share};
}

// The replicas' gradients are summed, so each microbatch carries 1 / (m w) of the global mean:
// exactly the Trainer's gradient of the mean over the whole batch. Per-microbatch updates
// (PipeDream style) take the mean of their own microbatch.
torch::Tensor StageExecutor::update_share(const torch::Tensor& loss, double share) const {
  return loss * share / double(microbatches_per_update_ * layout_.replicas);
}

double StageExecutor::slice_share(int slice) const {
  if (slices_.count() == 1) return 1.0;
  return double(slices_.lengths.at(size_t(slice))) / double(model_->sliceable_length());
}

BackwardSeeds StageExecutor::backward_roots(const Key& key, InFlight& state) {
  const auto [chunk, microbatch, slice] = key;
  const auto cache = kv_caches_.find({chunk, microbatch});
  if (recompute_.at(size_t(chunk))) {
    KeepBuffers first_forward_updated_them(*chunks_.at(size_t(chunk)).model);
    ReplayedSlice on_its_cache(cache != kv_caches_.end() ? &cache->second : nullptr, slice);
    forward_with_graph(key, state);
  }
  const bool last = is_last_stage(layout_.stage_of(chunk));
  BackwardSeeds seeds =
      backward_seeds(last, last ? state.scaled_loss : state.output, state.output_grad,
                     cache != kv_caches_.end() ? &cache->second : nullptr, slice);
  // (Slices run backward in reverse: slice 0's is the sequence's last.)
  if (cache != kv_caches_.end() && slice == 0) kv_caches_.erase(cache);
  state.output = torch::Tensor();
  state.scaled_loss = torch::Tensor();
  return seeds;
}

BackwardSeeds backward_seeds(bool last, const torch::Tensor& root, const torch::Tensor& received,
                             SequenceKvCache* cache, int slice) {
  BackwardSeeds seeds{{root}, {last ? torch::ones_like(root) : received}};
  // Token slices: the later slices' K/V gradients enter this slice's graph with its output's.
  if (cache != nullptr) cache->add_backward_roots(slice, seeds.roots, seeds.grads);
  return seeds;
}

void StageExecutor::backward(const Key& key) {
  InFlight& state = in_flight_.at(key);
  if (state.slot >= 0) {
    backward_graphed(key, state, /*input_only=*/false);
  } else {
    const BackwardSeeds seeds = backward_roots(key, state);
    torch::autograd::backward(seeds.roots, seeds.grads);
  }
  if (is_first_stage(layout_.stage_of(std::get<0>(key)))) in_flight_.erase(key);  // nothing to send
}

// B: the input gradient only, on the critical path of the previous stage; the graph stays for W.
void StageExecutor::backward_input(const Key& key) {
  InFlight& state = in_flight_.at(key);
  if (state.slot >= 0) return backward_graphed(key, state, /*input_only=*/true);
  BackwardSeeds seeds = backward_roots(key, state);
  state.weight_pass = std::make_unique<SplitBackward>(
      std::move(seeds.roots), std::move(seeds.grads), state.input,
      chunks_.at(size_t(std::get<0>(key))).model->parameters());
  int64_t held = 0;
  for (const auto& [k, s] : in_flight_) {
    if (s.weight_pass) held += s.weight_pass->held_gradient_bytes();
  }
  peak_weight_pass_bytes_ = std::max(peak_weight_pass_bytes_, held);
}

// W: the weight gradients from what B recorded; then the microbatch's graph can go.
void StageExecutor::backward_weight(const Key& key) {
  InFlight& state = in_flight_.at(key);
  if (state.slot >= 0) {
    weight_pass_graphed(key, state);
  } else {
    state.weight_pass->weight_pass();
    state.weight_pass.reset();
  }
  drop_if_done(key);
}

// A microbatch leaves a chunk once nothing remains to send and no weight pass is pending (a
// graphed one holds its slot until then).
void StageExecutor::drop_if_done(const Key& key) {
  const InFlight& state = in_flight_.at(key);
  const bool sent = state.grad_sent || is_first_stage(layout_.stage_of(std::get<0>(key)));
  if (sent && !state.weight_pass && state.slot < 0) in_flight_.erase(key);
}

Validation StageExecutor::evaluate(bool stoppable) {
  if (layout_.replica() != 0) return {};  // the replicas hold the same weights
  torch::NoGradGuard no_grad;
  std::vector<std::unique_ptr<EvalMode>> eval_mode;
  for (const auto& chunk : chunks_) eval_mode.push_back(std::make_unique<EvalMode>(*chunk.model));
  MeasureMeans means;
  point_at_latest_weights();
  // A stop cuts a long validation short; every validating worker stops before the same batch.
  std::optional<BatchStopVotes> stop;
  if (stoppable) stop.emplace(comm_, groups_.validation, layout_.stages());
  bool cut_short = false;
  for (int64_t i = 0; i < config_.eval.batches; ++i) {
    if (stop && stop->stop_before(i)) {
      cut_short = true;
      break;
    }
    evaluate_batch(i, config_.train.batch_size, means);
  }
  if (stop) stop->drain();
  Validation validation = layout_.holds_last_stage() ? means.result() : Validation{};
  validation.cut_short = cut_short;
  return validation;
}

// The chunks in stage order: the batch visits this worker v times (a V's turn stays here).
void StageExecutor::evaluate_batch(int64_t batch_index, int64_t rows, MeasureMeans& means) {
  Microbatch batch;
  if (data_ != nullptr) batch = on_device(data_->val_batch(batch_index, rows), device_);
  torch::Tensor output;
  for (const auto& chunk : chunks_) {
    const int s = chunk.stage;
    const int tag_before = kEvalTagBase + int(batch_index) * layout_.stages() + s - 1;
    const TensorSpec spec = activation_spec(s, rows);
    const auto input =
        is_first_stage(s)            ? batch.inputs
        : layout_.holds_stage(s - 1) ? output
                                     : comm_.recv(spec.shape, spec.dtype,
                                                  peer_rank(layout_.worker_of_stage(s - 1)), tag_before);
    output = chunk.model->forward(input);
    if (is_last_stage(s)) {
      means.add(*chunk.model, output, batch.labels);
    } else if (!layout_.holds_stage(s + 1)) {
      check_sent_shape(output, s, rows);
      comm_.send(output, peer_rank(layout_.worker_of_stage(s + 1)), tag_before + 1);
      if (flushes()) comm_.wait_sends();  // no-flush: the next step waits for it
    }
  }
}

}  // namespace pipetrain::runtime
