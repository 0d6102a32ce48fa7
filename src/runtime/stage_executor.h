#pragma once
// Runs one pipeline worker: interprets its actions of a Schedule (forward, backward,
// send/recv of activations and gradients, data-parallel gradient all-reduce, optimizer step)
// on real tensors, for each of the model chunks it holds; each chunk's WeightVersions object (its
// schedule's weight policy) picks the weights every action reads. No-flush schedules (2BW,
// PipeDream, PipeOptim, SpecTrain, ...) cover the whole run in one action list; train_step(k) runs
// the part that ends with step k's update.
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <tuple>
#include <memory>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "device/event_clock.h"
#include "device/pass_graphs.h"
#include "model/batch_source.h"
#include "model/model.h"
#include "runtime/comm.h"
#include "runtime/sent_messages.h"
#include "runtime/layout.h"
#include "runtime/memory_accounting.h"
#include "runtime/partition.h"
#include "runtime/replica_sums.h"
#include "runtime/run_spec.h"
#include "runtime/split_backward.h"
#include "runtime/zero1.h"
#include "runtime/token_slices.h"
#include "runtime/weight_versions.h"
#include "schedule/catalogue.h"
#include "schedule/schedule.h"
#include "schedule/step_lists.h"
#include "sim/timeline.h"
#include "train/loss_scale.h"
#include "train/checkpoint.h"
#include "train/step_result.h"

namespace pipetrain {
class MeasureMeans;
}

namespace pipetrain::runtime {

// Comm sub-group handles the executor reduces over.
struct CommGroups {
  int replicas = -1;              // this worker in every replica (DP all-reduce); -1: w = 1
  int pipeline = Comm::kWorld;    // every worker of this replica (the global grad norm)
  // Per shared parameter (Model::shared_parameters): this replica's workers holding its copies;
  // -1: not a member, or a single worker holds them all.
  std::vector<int> shared;
  int validation = -1;  // replica 0's workers, which validate (their stop votes); -1 elsewhere
};

// Writes `value` into `buffer` without bumping its version: graphs of microbatches still in
// flight saved BatchNorm's running statistics (unused by a training-mode backward).
void overwrite_buffer(const torch::Tensor& buffer, const torch::Tensor& value);

// A recomputed forward must not update running statistics a second time: they are restored.
class KeepBuffers {
 public:
  explicit KeepBuffers(torch::nn::Module& module);
  ~KeepBuffers();
  KeepBuffers(const KeepBuffers&) = delete;
  KeepBuffers& operator=(const KeepBuffers&) = delete;

 private:
  std::vector<std::pair<torch::Tensor, torch::Tensor>> saved_;
};

// What a chunk's backward of a microbatch's token slice starts from, and their gradients: on the
// last stage its loss (`root`), seeded with ones; elsewhere its output and the gradient received
// for it (`received`); with token slices (`cache`), the later slices' K/V and their gradients too.
// The eager and the graphed backward both start here.
struct BackwardSeeds {
  std::vector<torch::Tensor> roots, grads;
};
BackwardSeeds backward_seeds(bool last, const torch::Tensor& root, const torch::Tensor& received,
                             SequenceKvCache* cache, int slice);

// Its definitions: stage_executor.cpp (actions), stage_update.cpp (the update and its
// collectives), stage_state.cpp (checkpoints and resume), stage_graphs.cpp (train.cuda_graphs).
class StageExecutor {
 public:
  // `data` is null on workers without the first or last stage: only the first stage reads
  // inputs, only the last reads labels.
  // `spec` (made from `config`) gives the stages' layers, token slices and recomputation.
  // Its chunks, their optimizer state and every activation live on `device`.
  StageExecutor(const Config& config, const RunSpec& spec, const BatchSource* data, Comm& comm,
                const c10::Device& device, Layout layout, CommGroups groups,
                schedule::StepLists lists);
  // One optimizer step. loss is the global batch mean on the last stage, NaN elsewhere;
  // grad_norm (global, before clipping) and lr are the same on every worker.
  StepResult train_step(int64_t step);
  // Mean validation loss and measures on replica 0's last stage (NaN, none elsewhere), every
  // chunk in eval mode.
  // `stoppable`: a stop may end it after any batch, on every validating worker alike (then
  // cut_short).
  Validation evaluate(bool stoppable);

  struct Chunk {
    int stage;
    std::shared_ptr<StageModule> model;
    std::shared_ptr<WeightVersions> weights;  // what its actions read, what the optimizer updates
  };
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const Model& model_definition() const { return *model_; }
  const c10::Device& device() const { return device_; }
  // What its CUDA graphs' memory pools hold beyond their tensors (0 without captured graphs).
  int64_t graph_pool_bytes() const {
    return pass_graphs_ ? pass_graphs_->pool_bytes_beyond_tensors() : 0;
  }
  // With ZeRO-1 (pipeline.zero1) the optimizer over this replica's shard only.
  torch::optim::Optimizer& optimizer() { return zero1_ ? zero1_->shard_optimizer() : *optimizer_; }
  // The chunk's optimizer state named as a single-process checkpoint names it. With ZeRO-1 a
  // collective over the replica group (every replica calls it, chunk by chunk).
  std::vector<std::pair<std::string, torch::Tensor>> optimizer_state(const Chunk& chunk);
  // Every chunk's weights and optimizer state from a checkpoint's tensors (UserError naming
  // `origin` on a mismatch); with ZeRO-1 this replica keeps its shard of the state.
  void load_state(const CheckpointTensors& tensors, const std::string& origin);
  // The tensors the optimizer updates for the chunk (the masters of a no-flush policy), named as
  // the module's parameters.
  std::vector<std::pair<std::string, torch::Tensor>> optimized_tensors(const Chunk& chunk) const;
  const schedule::WeightPolicy& weight_policy() const { return lists_.schedule().policy; }
  LossScale& loss_scale() { return loss_scale_; }  // float16's scale, the same on every worker
  int64_t updates_before(int64_t step) const;  // m a step for per-microbatch policies, else 1
  // A version as the run counts it: a flushing schedule's list is one iteration's, numbered from
  // 0 at every step; a no-flush list's numbers are already the run's.
  int64_t run_version(int list_version) const;
  void point_at_latest_weights();  // the modules show the latest weights (checkpoints)
  // Exact resume of a no-flush run (see WeightVersions): the versions a checkpoint after `step`
  // steps holds for the chunk; one of them, named as its parameters; and the continuation at
  // `step` from the cut "iterations < step done", with the masters already loaded and each
  // chunk's checkpointed versions.
  std::vector<int> checkpointed_versions(const Chunk& chunk, int64_t step) const;
  // Whether the next steps may be followed by a checkpoint (default: yes). Prediction copies
  // what the forwards ahead of a step read only in such a step; checkpointable(): whether the
  // last step did (or needed nothing), the same answer on every worker.
  void set_checkpoint_may_follow(bool may) { checkpoint_may_follow_ = may; }
  bool checkpointable() const;
  std::vector<std::pair<std::string, torch::Tensor>> stashed_version(const Chunk& chunk,
                                                                    int version) const;
  void resume_at(int64_t step, std::vector<std::map<int, std::vector<torch::Tensor>>> stashed);
  // Most distinct weight copies each chunk held at once (1 for synchronous schedules).
  std::vector<int> peak_weight_copies() const;
  // Zero-bubble: the most bytes of junction gradients held between B and W passes at once.
  int64_t peak_weight_pass_bytes() const { return peak_weight_pass_bytes_; }
  // Every weight tensor this worker holds now: each chunk's parameters and, for no-flush
  // schedules, the masters and stashed versions (memory accounting).
  std::vector<torch::Tensor> held_weights() const;
  // Every action of the first `traced_steps` steps with wall-clock start and duration (ms on
  // the machine's monotonic clock, shared by all processes on it): the real-run timeline.
  const std::vector<sim::TimedEvent>& events() const { return events_; }
  static constexpr int64_t traced_steps = 20;
  // Where the traced actions read their memory (none: the trace has no memory). Not owned.
  void set_memory_watch(MemoryWatch* watch) { memory_watch_ = watch; }

 private:
  // What a chunk holds for one in-flight microbatch, dropped once its backward is done.
  struct InFlight {
    torch::Tensor input;        // received activation (leaf with requires_grad), or the inputs
    torch::Tensor output;       // chunk output kept for the backward (not on the last stage)
    torch::Tensor scaled_loss;  // last stage: this microbatch's share of the global mean
    torch::Tensor output_grad;  // received gradient w.r.t. output
    torch::Tensor targets;      // last stage: this microbatch's labels
    torch::Tensor loss_value;   // last stage: unscaled loss (float64, on the device: no sync)
    double loss_scale = 1;      // last stage, float16: the scale of the version its forward read
    std::unique_ptr<SplitBackward> weight_pass;  // zero-bubble: between its B and W
    bool grad_sent = false;     // the input gradient has left (only the W pass may remain)
    int slot = -1;              // train.cuda_graphs: the pass slot that holds it (-1: eager)
  };
  using Key = std::tuple<int, int, int>;  // (chunk, microbatch over the whole list, token slice)
  // The constructor's, for each of this worker's chunks in order.
  void add_chunk(int stage, bool recompute, const std::vector<SharedParameter>& shared,
                 std::vector<std::pair<std::string, torch::Tensor>>& named_params);
  // train_step's parts, in order.
  void begin_step(int64_t step);
  void run_step_actions(int64_t step, const std::vector<schedule::Action>& actions);
  void end_step(int64_t step, int64_t first_send);
  double step_loss(int64_t step);
  void run_action(const schedule::Action& action, const Microbatch& batch);
  void compute(const schedule::Action& action, const Key& key, const Microbatch& batch);
  void send_activation(const schedule::Action& action, const Key& key);
  void send_gradient(const schedule::Action& action, const Key& key);
  // `version`: the weight version it reads (the last stage scales its loss by that version's
  // float16 loss scale).
  void forward(const Key& key, int microbatch, const Microbatch& batch, int version);
  void forward_with_graph(const Key& key, InFlight& state);
  // One chunk's forward of a microbatch's token slice (`cache`: its sequence's K/V; null
  // unsliced): {its output, undefined}, or on the last stage {its update share of the loss, times
  // the float16 `scale` when defined; the loss in float64, for the log}.
  std::pair<torch::Tensor, torch::Tensor> chunk_forward(StageModule& model, bool last, int slice,
                                                        const torch::Tensor& input,
                                                        const torch::Tensor& targets,
                                                        SequenceKvCache* cache,
                                                        const torch::Tensor& scale) const;
  // A microbatch's loss (times its token slice's `share` of the sequence) as its update's share.
  torch::Tensor update_share(const torch::Tensor& loss, double share) const;
  double slice_share(int slice) const;  // a token slice's tokens / the sequence's (1 unsliced)
  void backward(const Key& key);
  void backward_input(const Key& key);   // zero-bubble B
  void backward_weight(const Key& key);  // zero-bubble W
  // What a backward starts from (rebuilding the graph first when the chunk recomputes).
  BackwardSeeds backward_roots(const Key& key, InFlight& state);
  void drop_if_done(const Key& key);
  // One validation batch through this worker's chunks; the last stage's measures into `means`.
  void evaluate_batch(int64_t batch_index, int64_t rows, MeasureMeans& means);
  // train.cuda_graphs (stage_graphs.cpp): every chunk's forward and backward of a microbatch
  // replayed in slots, one per microbatch its list holds at once (device/pass_graphs.h).
  // prepare: once, after the eager steps, before a step's actions.
  void prepare_pass_graphs(int64_t step);
  device::Passes passes_of(int chunk, bool split_backward) const;
  std::vector<device::PartExample> pass_examples(int64_t step, int chunk);
  void zero_gradients();  // to none, or (graphs) to zero where they are: the replays add there
  void forward_graphed(const Key& key, InFlight& state);
  torch::Tensor loss_scale_tensor(double scale) const;  // float16: a graphed pass's input
  void backward_graphed(const Key& key, InFlight& state, bool input_only);  // (B if input_only)
  void weight_pass_graphed(const Key& key, InFlight& state);             // W
  void free_pass_slot(int chunk, InFlight& state);
  std::vector<const void*> addresses_of(int chunk) const;
  void check_addresses_kept(int chunk) const;
  // Where the neighbouring stage is this worker's other chunk (a V's turn): handed over without
  // a transfer; elsewhere nothing.
  void hand_activation_over(const Key& key);
  void hand_gradient_over(const Key& key);
  // A worker's actions of `step` (a resumed run's first step: with those run ahead of it); this
  // worker's by default.
  std::vector<schedule::Action> actions_of(int64_t step, int worker = -1) const;
  // For each of this step's actions: what a receive lets go of (schedule/send_release.h).
  std::vector<std::optional<schedule::Message>> sends_released_in(int64_t step) const;
  void track_transfer(const schedule::Action& action, int64_t ticket,
                      const std::optional<schedule::Message>& released);
  // The stashing policies count each version's readers reader_span() steps ahead of `step`:
  // the chunks' actions of the steps not counted yet up to there (and they count as counted).
  std::vector<std::vector<schedule::Action>> readers_ahead_of(int64_t step);
  void count_readers_through(int64_t step);
  // The real-run timeline of the first traced_steps steps, as the device ran it
  // (device::EventClock): a mark before an action, its event from that mark to now, resolved
  // into clock times at the step's end, with the action's memory (memory_watch_).
  size_t trace_mark();
  void trace(sim::TimedEvent event, size_t start_mark);
  void resolve_trace();
  const Microbatch& batch_of(int64_t step);  // the global batch of a step (kept for two steps)
  // Flush schedules run one iteration's list again at every step and finish their sends before
  // each update; no-flush lists cover the whole run, step k being its k-th part (made step by
  // step: schedule::StepLists).
  bool flushes() const { return schedule::flushes(lists_.schedule().policy.kind); }
  int64_t list_start(int64_t step) const { return flushes() ? step : 0; }  // step of iteration 0
  // AllReduceGrads: the chunk's gradients and running statistics summed over its replicas,
  // posted; a flush schedule waits for them at once, a no-flush one where they are needed.
  void post_replica_sums(int chunk);
  void finish_running_statistics(int chunk, int stage);  // before the chunk's next compute
  std::vector<torch::Tensor> running_statistics(int chunk) const;
  // An update in two halves. begin: the gradients move to what the optimizer updates and the
  // reductions it needs (shared-parameter sums, global norm) are posted. finish: wait for them,
  // clip, step. Flush schedules finish at once; no-flush ones keep running the schedule and
  // finish only before the first action that reads the new version (or the next update, or the
  // step's end), so no stage waits at another's update.
  void begin_update(int produced_version);
  void finish_update(int stage, int64_t step);  // (stage, step: the timeline's labels)
  void apply_update(double global_norm, int produced_version);  // clip, step, new version
  // The loss scale update `produced_version - 1`'s gradients carry (1 without float16).
  double update_loss_scale(int produced_version) const;
  // What stage `stage` receives for `rows` samples; token slice `slice` (-1: whole sequence).
  TensorSpec activation_spec(int stage, int64_t rows, int slice = -1) const;
  // Shared parameters (GPT's embedding and head copy): local copies summed, the sums posted
  // (per group, Comm handles in `pending`), waited for here where this worker counts the group
  // in the norm; finish_shared_gradients waits for the rest and copies the sums back.
  void begin_shared_gradients(std::vector<int>& pending);
  void finish_shared_gradients(const std::vector<int>& pending);
  int64_t micro_rows() const;  // rows of one microbatch on this replica (microbatch_rows_of)
  bool is_first_stage(int stage) const { return stage == 0; }
  bool is_last_stage(int stage) const { return stage == layout_.stages() - 1; }
  int peer_rank(int worker) const { return layout_.rank_of(layout_.replica(), worker); }
  // Receives are posted one ahead of their action, so the data lands while this worker computes
  // (and the sender's send completes sooner); a posted receive never blocks anyone.
  struct RecvRequest {
    TensorSpec spec;
    int peer = 0, tag = 0;
  };
  RecvRequest recv_request(const schedule::Action& action) const;
  int message_tag(const schedule::Action& action) const;  // of a send or receive
  int tag_window() const;  // training tags count (microbatch, slice) units modulo this
  void check_sent_shape(const torch::Tensor& output, int stage, int64_t rows, int slice = -1) const;
  void post_next_receive(const std::vector<schedule::Action>& actions, size_t from, size_t end);
  torch::Tensor receive(const schedule::Action& action);

  Config config_;
  std::shared_ptr<const Model> model_;
  std::vector<StageRange> ranges_;
  const BatchSource* data_;
  Comm& comm_;
  c10::Device device_;
  Layout layout_;
  CommGroups groups_;
  schedule::StepLists lists_;
  std::vector<Chunk> chunks_;
  std::vector<bool> recompute_;  // per chunk: activation recomputation (pipeline.recompute)
  std::unique_ptr<torch::optim::Optimizer> optimizer_;  // null with ZeRO-1
  std::unique_ptr<Zero1Optimizer> zero1_;               // pipeline.zero1 = 1
  std::vector<torch::Tensor> step_params_;                 // what the optimizer updates
  int64_t resumed_at_ = 0;          // the first step of a resumed run
  int64_t readers_counted_to_ = -1;  // the last step whose readers the weights counted
  int microbatches_per_update_ = 1;
  std::map<int64_t, Microbatch> batches_;
  // Per shared parameter: the copies this worker holds (e.g. the embedding on the first stage,
  // the head's copy on the last), whose gradients are summed with the other workers' copies.
  std::vector<std::vector<torch::Tensor>> shared_copies_;
  std::vector<torch::Tensor> norm_params_;   // parameters counted in the global norm
  std::map<Key, InFlight> in_flight_;
  std::map<std::pair<int, int>, int> posted_receives_;  // (peer, tag) -> Comm's handle
  SentMessages sent_messages_;
  TokenSlices slices_;  // pipeline.slices; with more than one, the K/V cache per (chunk, microbatch)
  LossScale loss_scale_;  // float16: the last stage scales its loss, every stage unscales
  const schedule::ScheduleEntry& schedule_entry_;  // its closed-form rule names a loss's version
  std::map<std::pair<int, int>, SequenceKvCache> kv_caches_;
  int64_t peak_weight_pass_bytes_ = 0;
  int steps_pending_ = 0;  // OptimizerStep actions seen this step (one per chunk)
  bool checkpoint_may_follow_ = true;
  // The reductions an update posts before its norm is known.
  struct PostedNorm {
    std::vector<int> shared_reductions;  // per shared group: Comm handle still in flight, or -1
    int norm_reduction = -1;             // Comm handle of the squared-norm sum
    torch::Tensor squared_norm;
  };
  PostedNorm post_norm();  // the shared-parameter sums, then the squared norm's, posted
  // A chunk's replica sum in flight and the gradient tensors it lands in (the masters' by then).
  struct ReplicaGradients {
    PostedFlatSum sum;
    std::vector<torch::Tensor> grads;
  };
  static void land_replica_sums(std::vector<ReplicaGradients>& sums);  // waits, copies in, clears
  std::vector<ReplicaGradients> posted_gradient_sums_;  // posted at AllReduceGrads, not yet begun
  std::map<int, PostedFlatSum> posted_statistics_;       // per chunk: running statistics in flight
  struct PendingUpdate {
    int version = 0;  // the version it produces
    // No-flush with replicas: the replica sums, then post_norm(), on a helper thread.
    std::future<PostedNorm> posting;
    PostedNorm posted;  // otherwise posted at once
  };
  std::optional<PendingUpdate> pending_update_;
  std::vector<bool> shared_in_norm_;  // per shared group: this worker counts it in the global norm
  // Last stage: the sum of each iteration's unscaled losses, read once at the step's end.
  std::map<int, torch::Tensor> loss_by_iteration_;
  int64_t current_step_ = 0;
  std::vector<sim::TimedEvent> events_;
  std::unique_ptr<device::EventClock> clock_;
  struct PendingTrace {
    sim::TimedEvent event;
    size_t start, end;  // EventClock marks
  };
  std::vector<PendingTrace> pending_trace_;
  MemoryWatch* memory_watch_ = nullptr;
  std::unique_ptr<device::PassGraphs> pass_graphs_;  // null unless train.cuda_graphs
  bool pass_graphs_tried_ = false, pass_graphs_ready_ = false;
  struct PassSlots {
    std::vector<bool> busy;  // per slot
    bool split = false;      // the chunk's passes split the backward (zero-bubble's B and W)
    std::vector<const void*> addresses;  // the parameters' and gradients' at the capture
  };
  std::vector<PassSlots> pass_slots_;  // per chunk
  StepResult result_;
};

}  // namespace pipetrain::runtime
