#pragma once
// The Schedule value: what every worker does, in order, plus the facts needed to interpret it
// (stage placement, data-parallel width, weight-version policy). Pure data: no tensors, no I/O.
#include <string>
#include <string_view>
#include <vector>

#include "schedule/action.h"

namespace pipetrain::schedule {

// How compute actions choose the weights they read. The versions themselves are in the actions;
// the policy says which rule they follow (the validator checks it) and what the runtime keeps.
enum class WeightPolicyKind {
  Sync,          // one version; every iteration reads the weights of the previous flush
  DoubleBuffer,  // PipeDream-2BW: group g reads version max(0, g-1); at most 2 live versions
                 // (after WeightPolicy::sync_groups flushed groups: double_buffer_version)
  Stash,         // PipeDream: forward reads the latest; backward reuses the forward's version
  Predicted,     // PipeOptim / SpecTrain: read the latest, extrapolate it s updates ahead
};

std::string_view policy_name(WeightPolicyKind kind);
bool parse_policy(std::string_view name, WeightPolicyKind* kind);

struct WeightPolicy {
  WeightPolicyKind kind = WeightPolicyKind::Sync;
  // Predicted only: per pipeline stage, how many optimizer updates ahead the forward (and the
  // backward) should predict. Derived from the schedule by derive_staleness(), never typed in.
  std::vector<int> forward_staleness;
  std::vector<int> backward_staleness;
  bool predict_backward = false;  // SpecTrain also predicts for the backward; PipeOptim not
  // DoubleBuffer only ("2bw-predict"): each stashed version is extrapolated this many updates
  // ahead with the optimizer's own direction, to cancel 2BW's one-step delay.
  int predict_ahead = 0;
  // DoubleBuffer only: the first sync_groups groups run as 1F1B with a flush after each (group g
  // reads version g), a synchronous warm-up; the groups after them follow 2BW's delayed rule.
  int sync_groups = 0;
};

// The version 2BW's group g reads when its first `sync_groups` groups ran synchronously: g up to
// and including group sync_groups (the first after the last flush, on a fresh pipeline), then g-1.
inline int double_buffer_version(int group, int sync_groups) {
  return group <= sync_groups ? group : group - 1;
}

// Which pipeline stage a worker's chunk holds. Looping (Megatron): chunk c of worker w is stage
// c * p + w. V (zero-bubble ZB-V, DualPipeV): even chunks run down the workers and odd ones back
// up, c * p + w for even c and c * p + p - 1 - w for odd c; with two chunks worker w holds
// stages w and 2p - 1 - w, so worker 0 holds the first and the last stage.
enum class Placement { Looping, V };
std::string_view placement_name(Placement placement);
bool parse_placement(std::string_view name, Placement* placement);
// The stage that chunk `chunk` of worker `worker` holds among `workers`, and the worker that holds
// stage `stage`: the one rule of both placements (the runtime's Layout asks it too).
inline int stage_at(Placement placement, int workers, int worker, int chunk) {
  const bool upward = placement == Placement::V && chunk % 2 == 1;
  return chunk * workers + (upward ? workers - 1 - worker : worker);
}
inline int worker_at(Placement placement, int workers, int stage) {
  const int offset = stage % workers;
  const bool upward = placement == Placement::V && (stage / workers) % 2 == 1;
  return upward ? workers - 1 - offset : offset;
}

struct Schedule {
  std::string name;       // generator name ("1f1b", "2bw", ...)
  int workers = 1;        // p: pipeline workers (one replica)
  int chunks = 1;         // v: model chunks per worker (placed by `placement`)
  int microbatches = 1;   // m: microbatches per iteration (per weight-update group for 2BW)
  int slices = 1;         // token slices per microbatch
  int iterations = 1;     // training iterations covered by the lists
  int dp_width = 1;       // w: replicas of every worker; AllReduceGrads runs among them
  Placement placement = Placement::Looping;
  WeightPolicy policy;
  std::vector<std::vector<Action>> actions;  // [worker][position]

  int stages() const { return workers * chunks; }
  int stage_of(int worker, int chunk) const { return stage_at(placement, workers, worker, chunk); }
  int chunk_of_stage(int stage) const { return stage / workers; }
  int worker_of_stage(int stage) const { return worker_at(placement, workers, stage); }
  int stage_of(int worker, const Action& a) const { return stage_of(worker, a.chunk); }
  int total_microbatches() const { return iterations * microbatches; }
  int global_microbatch(const Action& a) const { return a.iteration * microbatches + a.microbatch; }
};

// The most microbatches `chunk` holds at once in a worker's `actions`: the slots a CUDA-graphed
// chunk captures (device/pass_graphs.h). A microbatch takes its slot with its first token
// slice's forward and leaves it with that slice's backward (the last of its backwards), or a
// split backward's weight pass.
int most_in_flight(const std::vector<Action>& actions, int chunk);
// Whether `chunk`'s backwards are split in two in `actions` (zero-bubble's B and W).
bool splits_backward(const std::vector<Action>& actions, int chunk);

// Parameters of a generator. Nominal costs only order the send/recv pairs (see lower.h); the
// simulator takes its own cost model.
struct ScheduleSpec {
  std::string name = "1f1b";
  int stages = 4;        // p (workers)
  int microbatches = 8;  // m
  int chunks = 1;        // v (interleaved, bfs)
  int slices = 1;        // token slices per microbatch (gpipe)
  int iterations = 1;
  int dp_width = 1;
  int sync_iterations = 0;  // 2bw: iterations that flush before the no-flush rule (sync_groups)
  double nominal_forward = 1.0;   // relative forward time of one chunk
  double nominal_backward = 2.0;  // relative full backward time (input + weight)
  double nominal_weight = 1.0;    // part of the backward that is the weight gradient
};

}  // namespace pipetrain::schedule
