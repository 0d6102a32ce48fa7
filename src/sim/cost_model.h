#pragma once
// The simulator's cost model: a plain struct so the planner and TeraPipe can fill it from a
// profile (per pipeline stage, possibly non-uniform).
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::sim {

struct StageCost {
  double forward_ms = 1.0;
  double backward_ms = 2.0;  // full backward: input gradient + weight gradient
  double weight_ms = 1.0;    // the weight-gradient part of backward_ms (split backward, ZB)
  // A split backward's input-gradient pass (B); < 0: backward_ms - weight_ms. More than that
  // where both passes redo forward work (chunked cross-entropy recomputes its logits in each).
  double input_ms = -1.0;
  double optimizer_ms = 0.0;
  // Gradient all-reduce across the dp_width replicas: flush schedules wait for it; no-flush ones
  // post it and wait only before the first action that needs their update (as the runtime does).
  double allreduce_ms = 0.0;
  double activation_bytes = 1.0;   // held per microbatch from forward to end of backward
  double weight_bytes = 1.0;       // one weight version
  double transfer_bytes = 0.0;     // activation sent to the next stage (gradient: same size)
  // Split backward: held besides the activations from a BackwardInput's start to the end of its
  // BackwardWeight (the output gradients the weight-gradient pass needs).
  double weight_pass_bytes = 0.0;
  // For peak_held_bytes: the stage's gradients, made by its first gradient-producing action of an
  // iteration and freed after the worker's update of the iteration, at its last OptimizerStep (a
  // flushing runtime step starts with none), the transient workspace of each of its compute
  // actions, and with dp_width > 1 a flat copy of them from its AllReduceGrads until the sum lands.
  double gradient_bytes = 0.0;
  double workspace_bytes = 0.0;
  // A split backward's passes: a BackwardInput's transient bytes beyond its weight_pass_bytes
  // (which it records as it runs), and a BackwardWeight's once the stage holds gradients (its
  // first W of an iteration makes them in place: none); < 0: workspace_bytes.
  double input_workspace_bytes = -1.0;
  double weight_workspace_bytes = -1.0;
  // A whole Backward's transient bytes (fewer than workspace_bytes where the stage's forward
  // needs more: chunked cross-entropy's); < 0: workspace_bytes.
  double backward_workspace_bytes = -1.0;
};

// A stage's B time: input_ms, or what the full backward leaves beside W.
double input_pass_ms(const StageCost& stage);

struct CostModel {
  // One entry per pipeline stage (chunk * workers + worker), or a single entry for all stages.
  std::vector<StageCost> stages = std::vector<StageCost>(1);  // (an initializer list: GCC 12 warns)
  double p2p_latency_ms = 0.0;
  double bandwidth_bytes_per_ms = 0.0;  // 0: transfers cost only the latency
  double samples_per_microbatch = 1.0;
  // Optional share of a microbatch's compute taken by each token slice (sums to 1); empty:
  // slices share evenly. TeraPipe slices differ in length and context, hence in cost.
  std::vector<double> slice_fraction;
  // Every worker's k-th update starts together, as on pipetrain's runtime, whose update
  // all-reduces the global gradient norm (and each step ends with a stop-flag all-reduce). Off:
  // updates are local (the papers' systems).
  bool synchronous_updates = false;
  // CPU time a send keeps its sender busy (posting it; Gloo writes to the socket in the
  // caller's thread): send_post_ms + bytes / send_post_bytes_per_ms (0: no per-byte part).
  // The data leaves after it. Zero by default: sends are free to the sender.
  double send_post_ms = 0.0;
  double send_post_bytes_per_ms = 0.0;
  // Cores that all workers (of all dp_width replicas) share; 0: each worker has its own
  // device. With more computing workers than cores they take turns (sim/shared_cores.h).
  double shared_cores = 0.0;

  const StageCost& stage(int stage_index) const;
  double slice_share(int slice, int slices) const;
  // Duration of any action (transfers: of the send) on `worker`.
  double duration_ms(const schedule::Schedule& s, int worker, const schedule::Action& a) const;
  // The sender's own time for a send (see send_post_ms).
  double send_post_duration_ms(const schedule::Schedule& s, int worker, const schedule::Action& a) const;
};

// Whether an action keeps its worker computing (compute and the optimizer step; transfers and
// posted collectives do not): what busy time, bubbles and shared cores count.
bool counts_as_busy(schedule::ActionKind kind);

// Costs given per worker's share of the model (one pipeline stage of a v = 1 schedule), spread
// over `chunks` chunks: times, activations and weights divided by v; transfers keep their size.
CostModel uniform_cost_model(const StageCost& per_worker, int chunks = 1);

}  // namespace pipetrain::sim
