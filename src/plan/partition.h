#pragma once
// Balanced partitioning of a layer list into contiguous pipeline stages (BaPipe): minimise the
// slowest stage, counting its compute and the send of its output activation, subject to each
// stage fitting in device memory. Exact dynamic programming, O(stages * layers^2).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipetrain::plan {

struct LayerCost {
  std::string name;
  double forward_s = 0;         // per microbatch
  double backward_s = 0;        // per microbatch (input + weight gradient)
  double param_bytes = 0;       // weights of one version
  double optimizer_bytes = 0;   // optimizer state for those weights
  double activation_bytes = 0;  // stashed per in-flight microbatch
  double output_bytes = 0;      // activation sent to the next stage per microbatch
  double optimizer_s = 0;       // the optimizer step for these weights, once per iteration
  // The runtime's memory model (plans of models run here; 0 / -1 elsewhere):
  double input_bytes = 0;       // what it receives, kept per in-flight microbatch if it starts a stage
  double workspace_bytes = 0;   // transient, at the peak of its forward or backward
  double backward_workspace_bytes = -1;  // a whole backward's, where smaller; < 0: workspace_bytes
  double optimizer_workspace_bytes = 0;  // transient, in the optimizer's step
  // A parameter shared with layer `shared_with` (GPT's tied embedding): held here a second time,
  // with its gradient and optimizer state, when that layer is on another stage.
  double shared_param_bytes = 0, shared_optimizer_bytes = 0;
  int shared_with = -1;
  // The split backward (zero-bubble schedules): the weight-gradient part of backward_s (< 0:
  // unknown, taken as half), and what a microbatch holds from its input-gradient pass to its
  // weight-gradient pass besides its activations (the output gradients B records where the
  // weights join the input's path).
  double weight_s = -1;
  double weight_pass_bytes = 0;
  // Its input-gradient pass (B): < 0, what backward_s leaves beside weight_s. More where both
  // passes redo forward work (chunked cross-entropy recomputes its logits in B and in W).
  double input_s = -1;
  // The high-water mark of its input-gradient pass above the pass's start (what it records and
  // its input's gradient included), and the transient bytes of its weight-gradient pass once the
  // weights hold gradients (< 0: unknown; the stage's workspace stands in).
  double input_pass_peak_bytes = -1;
  double weight_workspace_bytes = -1;
};

// The weight-gradient time of a layer: measured, or half of its backward.
double weight_gradient_s(const LayerCost& layer);
// The input-gradient pass's time: measured, or the backward less weight_gradient_s.
double input_gradient_s(const LayerCost& layer);
// Its backward as a stage runs it: whole, or split into B and W.
double stage_backward_s(const LayerCost& layer, bool split);

struct StageLimits {
  double memory_bytes = 1e300;   // per device
  double link_bandwidth = 1e300; // bytes/s between consecutive stages
  double link_latency_s = 0;
  // Memory model of the schedule: stage s keeps in_flight(s) microbatches of activations and
  // `weight_versions` copies of its weights (1F1B: in_flight = stages - s; GPipe: microbatches).
  int weight_versions = 1;
  // A no-flush schedule's update reads one set of gradients while the next iteration's
  // backwards make the next (runtime/stage_update.cpp): a second set beside the optimizer's.
  bool second_gradient_set = false;
  int microbatches = 1;
  // Per stage, microbatches of its activations held at the schedule's peak (the schedule's own
  // count, ScheduleStats::peak_inflight over its chunks); empty: the formula below.
  std::vector<double> in_flight;
  bool gpipe_memory = false;  // in-flight = microbatches on every stage instead of stages - s
  double extra_bytes = 0;     // per stage, whatever it holds (e.g. a recomputation workspace)
  // Zero-bubble's split backward: a stage past the first runs B and W (input_s + weight_s, more
  // than backward_s where both passes recompute); the first runs whole backwards
  // (schedule::lower_schedule).
  bool split_backward = false;
  // pipetrain's recomputation: a stage keeps only its input per in-flight microbatch and
  // rebuilds one microbatch's activations of all its layers in backward.
  bool recompute_stage = false;
  // train.cuda_graphs on pipeline workers: each microbatch in flight is a slot that keeps its
  // memory pool (plan/graph_memory.h); nullopt: eager.
  struct Graphed {
    bool extra_weight_copy = false;  // a stashing policy's parameters
    bool shared_pool = false;        // recomputing with a whole backward: one pool for all slots
    bool flushes = true;             // else its capture step holds the eager run's memory too
  };
  std::optional<Graphed> graphed;
};

struct Partition {
  std::vector<int> layer_counts;  // per stage, summing to the number of layers
  double bottleneck_s = 0;        // slowest stage: compute + sending its output (fwd + bwd)
  std::vector<double> stage_time_s, stage_memory_bytes;
};

// One stage's memory in the parts a schedule combines: weights (one version), gradient and
// optimizer state, what each in-flight microbatch holds, what exists once (the activations of
// a microbatch being recomputed) and the transient workspace: its largest layer's (`workspace`,
// what a CUDA graph's pool keeps), and what an eager run adds to its held activations
// (`eager_workspace`: less the later layers' activations of the same microbatch, which do not
// exist while the layer runs).
struct StageMemoryParts {
  double weights = 0, optimizer = 0, per_microbatch = 0, once = 0, workspace = 0;
  double eager_workspace = 0;
  // A whole backward's (eager): where a layer's forward needs more than its backward (chunked
  // cross-entropy), the backward meets the gradients without it; a recomputed stage's backward
  // runs its forward again: eager_workspace.
  double backward_workspace = 0;
  // A split backward's passes: B's transient bytes beyond what it records (its layers run last
  // to first, each beside what the later ones recorded and its incoming gradient), W's largest
  // layer's; each the eager workspace when a layer's is unknown.
  double input_workspace = 0, weight_workspace = 0;
  double optimizer_workspace = 0;
};
StageMemoryParts stage_memory_parts(const std::vector<LayerCost>& layers, int first, int last,
                                    const StageLimits& limits);

// Time and memory of stage `stage` (0-based of `stages`) holding layers [first, last).
double stage_time(const std::vector<LayerCost>& layers, int first, int last, bool last_stage,
                  const StageLimits& limits);
double stage_memory(const std::vector<LayerCost>& layers, int first, int last, int stage,
                    int stages, const StageLimits& limits);

// nullopt when no partition fits in memory.
std::optional<Partition> balanced_partition(const std::vector<LayerCost>& layers, int stages,
                                            const StageLimits& limits);
// A V placement's cut (v_partition.cpp): 2 x `workers` stages, worker w holding stages w and
// 2p-1-w, chosen so that the slowest worker's two stages together take the least time, each
// worker's two stages together within memory_bytes; nullopt when no cut fits. Its bottleneck_s
// is the slowest worker's (v_worker_bottleneck of its stage times).
std::optional<Partition> v_balanced_partition(const std::vector<LayerCost>& layers, int workers,
                                              const StageLimits& limits);
double v_worker_bottleneck(const std::vector<double>& stage_times);
// Scores a given partition with the same model (for comparisons and the planner).
Partition evaluate_partition(const std::vector<LayerCost>& layers,
                             const std::vector<int>& layer_counts, const StageLimits& limits);
std::vector<int> equal_layer_counts(int layers, int stages);

}  // namespace pipetrain::plan
