#include "plan/planner.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "plan/graph_memory.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/validate.h"
#include "sim/simulator.h"

namespace pipetrain::plan {
namespace {

// Ring all-reduce of `bytes` over `width` ranks.
double allreduce_seconds(double bytes, int width, double bandwidth, double latency) {
  if (width <= 1) return 0;
  return 2.0 * (width - 1) / width * bytes / bandwidth + 2.0 * (width - 1) * latency;
}

struct Placement {
  bool allreduce_inside_node, pipeline_crosses_nodes;
  double p2p_bandwidth, p2p_latency, allreduce_bandwidth, allreduce_latency;
};

// Topology-aware placement: the w replicas of a stage share a node when they fit (all-reduce on
// NVLink), consecutive stages fill a node before the next (pipeline traffic crosses nodes only
// at node boundaries, where the node's replicas share its network link).
Placement place(const ClusterSpec& c, int stages, int width) {
  Placement p{};
  p.allreduce_inside_node = width <= c.devices_per_node;
  const int stages_per_node = p.allreduce_inside_node ? c.devices_per_node / width : 0;
  p.pipeline_crosses_nodes = stages > 1 && (stages_per_node == 0 || stages > stages_per_node);
  if (p.pipeline_crosses_nodes) {
    p.p2p_bandwidth = c.inter_node_bandwidth / std::min(width, c.devices_per_node);
    p.p2p_latency = c.inter_node_latency_s;
  } else {
    p.p2p_bandwidth = c.intra_node_bandwidth;
    p.p2p_latency = c.intra_node_latency_s;
  }
  p.allreduce_bandwidth = p.allreduce_inside_node ? c.intra_node_bandwidth
                                                  : c.inter_node_bandwidth / c.devices_per_node;
  p.allreduce_latency = p.allreduce_inside_node ? c.intra_node_latency_s : c.inter_node_latency_s;
  if (p.allreduce_inside_node && c.measured_allreduce_bandwidth > 0) {
    p.allreduce_bandwidth = c.measured_allreduce_bandwidth;
    p.allreduce_latency = c.measured_allreduce_latency_s;
  }
  return p;
}


// Workers sharing a node's cores: with fewer workers than cores each computes on several
// threads (2 threads ran the default model 1.6x as fast as 1: bench/train_throughput, i.e.
// threads^0.7); with more, they take turns on the cores (shared_cores below, simulated by
// sim/shared_cores.h).
double thread_speedup(const ClusterSpec& cluster) {
  if (cluster.cores_per_node <= 0 || cluster.devices_per_node >= cluster.cores_per_node) return 1;
  return std::pow(double(cluster.cores_per_node / cluster.devices_per_node), 0.7);
}

// Cores the workers share when a node runs more workers than it has cores (0: one each). The
// nodes' cores are pooled: the workers spread evenly over them.
double shared_cores(const ClusterSpec& cluster) {
  if (cluster.cores_per_node <= 0 || cluster.devices_per_node <= cluster.cores_per_node) return 0;
  return double(cluster.cores_per_node) * cluster.nodes;
}

// Per layer, the costs a candidate plans with, and whether its memory is the runtime's.
std::vector<LayerCost> candidate_layers(const PlanRequest& request, int variant, int64_t microbatch,
                                        bool recompute) {
  if (!request.model_variants.empty()) {
    auto layers = request.model_variants.at(size_t(variant)).costs(microbatch);
    const double speedup = thread_speedup(request.cluster);
    for (auto& layer : layers) {
      // A recomputed forward belongs to B (and to the whole backward).
      const double recomputed = recompute ? layer.forward_s / speedup : 0;
      layer.input_s = input_gradient_s(layer) / speedup + recomputed;
      layer.weight_s = weight_gradient_s(layer) / speedup;
      layer.forward_s /= speedup;
      layer.backward_s = layer.backward_s / speedup + recomputed;
    }
    return layers;
  }
  if (request.profile) {
    auto layers = layer_costs(*request.profile, microbatch);  // fp32 as measured
    return recompute ? with_recomputation(std::move(layers)) : layers;
  }
  return analytic_gpt_layers(request.model, request.cluster, AnalyticOptions{microbatch, recompute});
}

// [first, last) layer ranges of the model stages a candidate simulates (its chunk partition
// for interleaved schedules).
std::vector<std::pair<int, int>> simulated_stage_layers(const PlanCandidate& c) {
  const auto& counts = c.chunk_partition.empty() ? c.partition : c.chunk_partition;
  std::vector<std::pair<int, int>> ranges;
  int first = 0;
  for (int count : counts) ranges.push_back({first, first + count}), first += count;
  return ranges;
}

// What a microbatch in flight holds on each model stage, its gradients (its weights' size) and
// its compute's workspace, for the simulator's peaks. Under a split backward B makes input
// gradients and records output gradients, a W pass only weight gradients (the first stage runs
// whole backwards: schedule::lower_schedule).
void set_held_activations(sim::CostModel& costs, const std::vector<LayerCost>& layers,
                          const PlanCandidate& c, const StageLimits& limits) {
  const auto ranges = simulated_stage_layers(c);
  for (size_t s = 0; s < ranges.size(); ++s) {
    const auto parts = stage_memory_parts(layers, ranges[s].first, ranges[s].second, limits);
    sim::StageCost& stage = costs.stages[s];
    stage.activation_bytes = parts.per_microbatch;
    stage.gradient_bytes = parts.weights;
    stage.workspace_bytes = parts.eager_workspace;
    stage.input_workspace_bytes = parts.input_workspace;
    stage.weight_workspace_bytes = parts.weight_workspace;
    stage.backward_workspace_bytes = parts.backward_workspace;
  }
}

// What a worker's chunk holds under train.cuda_graphs: its parts and its slots.
GraphedChunk graphed_chunk(const std::vector<LayerCost>& layers, std::pair<int, int> range,
                           const StageLimits& limits, const std::vector<schedule::Action>& actions,
                           int chunk) {
  GraphedChunk graphed;
  graphed.parts = stage_memory_parts(layers, range.first, range.second, limits);
  graphed.input_bytes = layers[size_t(range.first)].input_bytes;
  graphed.output_bytes = layers[size_t(range.second - 1)].output_bytes;
  graphed.slots = schedule::most_in_flight(actions, chunk);
  graphed.shared_pool = limits.graphed && limits.graphed->shared_pool;
  return graphed;
}

// The graphs' memory rules of a candidate's schedule (the single-process trainer's one graph of
// its whole step holds the eager step's peak: counted as eager).
std::optional<StageLimits::Graphed> graphed_limits(const PlanRequest& request,
                                                   const schedule::Schedule& lists, bool recompute,
                                                   bool split_backward, int workers) {
  const bool flushes = schedule::flushes(lists.policy.kind);
  if (!request.cuda_graphs || (workers == 1 && lists.chunks == 1 && flushes)) return std::nullopt;
  return StageLimits::Graphed{schedule::stashes_versions(lists.policy.kind),
                              recompute && !split_backward, flushes};
}

// The memory as the schedule holds it, the worst worker: its chunks' weights in as many versions
// as the action lists keep alive, gradients (`runtime_memory` and flushing: from the worker's
// first backward of the step on) and optimizer state, the activations in flight at the
// simulated peak (with the split backward's held weight-pass gradients), one recomputed
// microbatch, the largest (eager) workspace, its overhead. With CUDA graphs (limits.graphed), the
// slots instead (plan/graph_memory.h), and a stashing policy's parameters are one more copy of
// the weights.
double worker_peak_memory(const std::vector<LayerCost>& layers, PlanCandidate& c,
                          const StageLimits& limits, const schedule::Schedule& lists,
                          const sim::SimResult& result, bool flushes, bool runtime_memory) {
  const auto ranges = simulated_stage_layers(c);
  // The runtime's eager flushing step starts without gradients (set to none): the simulator
  // places them, and each compute action's workspace, on the timeline (set_held_activations).
  // A no-flush worker keeps its gradients whole (fixed): the timeline gives the rest.
  const bool gradients_timed = runtime_memory && flushes && !limits.graphed;
  double worst = 0;
  c.worker_memory_bytes.clear();
  for (int w = 0; w < c.stages; ++w) {
    double fixed = 0, once = 0, workspace = 0, optimizer_workspace = 0, gradients = 0;
    std::vector<GraphedChunk> chunks;
    for (int chunk = 0; chunk < lists.chunks; ++chunk) {
      const auto s = size_t(lists.stage_of(w, chunk));
      chunks.push_back(graphed_chunk(layers, ranges[s], limits, lists.actions[size_t(w)], chunk));
      const StageMemoryParts& parts = chunks.back().parts;
      fixed += result.stats.peak_live_versions[size_t(w)] * parts.weights + parts.optimizer;
      if (limits.second_gradient_set) fixed += parts.weights;
      if (limits.graphed && limits.graphed->extra_weight_copy) fixed += parts.weights;
      gradients += parts.weights;
      once = std::max(once, parts.once);
      workspace = std::max(workspace, parts.eager_workspace);
      optimizer_workspace = std::max(optimizer_workspace, parts.optimizer_workspace);
    }
    // The step's temporaries: a flushing schedule updates with nothing in flight (its gradients
    // all made), a no-flush one with its microbatches' activations held (both measured:
    // docs/benchmarks.md, GPT-2 small).
    double held = 0;
    if (gradients_timed) {
      fixed -= gradients;
      held = std::max(result.peak_held_bytes[size_t(w)], gradients + optimizer_workspace) + once;
    } else if (flushes) {
      held = std::max(result.peak_activation_bytes[size_t(w)] + workspace, optimizer_workspace) + once;
    } else {
      // A no-flush update meets microbatches in flight. Its replica sums land before it runs:
      // their flat buffers meet what the timeline holds (the run-on's transients), not the
      // optimizer's temporaries.
      held = result.peak_activation_bytes[size_t(w)] + workspace + optimizer_workspace + once;
      if (runtime_memory && !limits.graphed) held = std::max(held, result.peak_transient_bytes[size_t(w)] + once);
    }
    if (limits.graphed) held = graphed_held_bytes(chunks, optimizer_workspace, flushes ? 0 : held);
    c.worker_memory_bytes.push_back(fixed + held + limits.extra_bytes);
    worst = std::max(worst, c.worker_memory_bytes.back());
  }
  return worst;
}

void rank_candidates(PlanResult& result) {
  // Plans within 1% of each other: fewer workers first (less resident overhead, fewer
  // messages; on shared cores the prediction cannot tell them apart).
  std::sort(result.ranked.begin(), result.ranked.end(), [](const PlanCandidate& a, const PlanCandidate& b) {
    const int workers_a = a.stages * a.dp_width, workers_b = b.stages * b.dp_width;
    if (workers_a != workers_b && std::abs(a.samples_per_s - b.samples_per_s) <=
                                      0.01 * std::max(a.samples_per_s, b.samples_per_s)) {
      return workers_a < workers_b;
    }
    return a.samples_per_s > b.samples_per_s;
  });
  if (result.ranked.empty()) return;
  const PlanCandidate& best = result.ranked.front();
  for (auto& c : result.ranked) {
    const double compute = c.compute_s_per_sample - best.compute_s_per_sample;
    const double allreduce = c.allreduce_s_per_sample - best.allreduce_s_per_sample;
    const double other = c.other_s_per_sample - best.other_s_per_sample;
    if (&c == &best) {
      c.lost_because = "best";
    } else if (compute >= allreduce && compute >= other) {
      c.lost_because = c.recompute ? "compute (recomputation, balance)" : "compute (balance, microbatch size)";
    } else if (allreduce >= other) {
      c.lost_because = "communication (gradient all-reduce)";
    } else {
      c.lost_because = "bubble / pipeline transfers";
    }
  }
}

}  // namespace

int planned_layer_count(const PlanRequest& request) {
  if (!request.model_variants.empty()) return int(request.model_variants.front().costs(1).size());
  return request.profile ? int(request.profile->layers.size()) : int(request.model.layers + 2);
}

double planned_parameters(const PlanRequest& request) {
  double bytes = 0;
  if (!request.model_variants.empty()) {
    for (const auto& layer : request.model_variants.front().costs(1)) bytes += layer.param_bytes;
    return bytes / 4;  // fp32 (a float64 model counts twice: a label, not a limit)
  }
  if (request.has_gpt_shape() || !request.profile) return request.model.parameters();
  for (const auto& layer : request.profile->layers) bytes += layer.param_bytes;
  return bytes / 4;  // profiles hold fp32 parameter bytes
}

// The simulator's cost of layers [first, first + count) as one model stage (no all-reduce).
sim::StageCost model_stage_cost(const std::vector<LayerCost>& layers, int first, int count) {
  sim::StageCost stage;
  stage.forward_ms = stage.backward_ms = stage.weight_ms = stage.input_ms = 0;
  stage.weight_bytes = stage.activation_bytes = 0;
  for (int i = first; i < first + count; ++i) {
    stage.forward_ms += layers[i].forward_s * 1e3;
    stage.backward_ms += layers[i].backward_s * 1e3;
    stage.weight_ms += weight_gradient_s(layers[i]) * 1e3;
    stage.input_ms += input_gradient_s(layers[i]) * 1e3;
    stage.weight_pass_bytes += layers[i].weight_pass_bytes;
    stage.weight_bytes += layers[i].param_bytes;
    stage.activation_bytes += layers[i].activation_bytes;
    stage.optimizer_ms += layers[i].optimizer_s * 1e3;
  }
  stage.transfer_bytes = layers[size_t(first + count - 1)].output_bytes;
  // The first stage runs whole backwards (schedule::lower_schedule): no B, no recorded bytes.
  if (first == 0) stage.weight_pass_bytes = stage.input_ms = 0, stage.weight_ms = stage.backward_ms;
  return stage;
}

namespace {

// Why the runtime cannot run a candidate as asked; empty when it can (or when planning for the
// simulator alone).
std::string runtime_refusal(const PlanRequest& request, const schedule::ScheduleEntry& entry,
                            const PlanCandidate& c) {
  if (!request.for_pipetrain_runtime) return "";
  if (!entry.runtime.runs) return fmt::format("the runtime does not run {}", c.schedule);
  if (c.dp_width > 1 && !entry.runtime.data_parallel) {
    return fmt::format("the runtime runs {} without data parallelism (w = 1 only)", c.schedule);
  }
  if (c.recompute && !entry.runtime.recompute) {
    return fmt::format("the runtime runs {} without recomputation", c.schedule);
  }
  return "";
}

schedule::ScheduleSpec candidate_spec(const PlanRequest& request,
                                      const schedule::ScheduleEntry& entry,
                                      const PlanCandidate& c) {
  schedule::ScheduleSpec spec;
  spec.name = c.schedule;
  spec.stages = c.stages;
  spec.microbatches = static_cast<int>(c.microbatches);
  spec.chunks = entry.planner.chunks;
  spec.iterations = entry.simulated_iterations(request.for_pipetrain_runtime);
  spec.dp_width = c.dp_width;
  return spec;
}

// The partitioner's limits for a candidate: the device's memory and links, the weight versions
// and microbatches its schedule's lists hold (1F1B p - s, GPipe m, ZB-H2 2p - 1, a V two chunks
// each), CUDA graphs' rules, and what a recomputed layer needs beside.
StageLimits candidate_limits(const PlanRequest& request, const schedule::ScheduleEntry& entry,
                             const schedule::Schedule& lists, const PlanCandidate& c,
                             const Placement& placement) {
  const schedule::ScheduleStats held = schedule::validate_or_throw(lists);
  StageLimits limits;
  limits.memory_bytes = request.cluster.device_memory_bytes;
  limits.link_bandwidth = placement.p2p_bandwidth;
  limits.link_latency_s = placement.p2p_latency;
  limits.weight_versions = entry.weight_versions(c.stages);
  limits.second_gradient_set = !entry.flushes();
  limits.microbatches = static_cast<int>(c.microbatches);
  for (int w = 0; w < c.stages; ++w) {
    limits.in_flight.push_back(double(held.peak_inflight[size_t(w)]) / lists.chunks);
  }
  limits.extra_bytes = request.cluster.worker_overhead_bytes;
  limits.split_backward = entry.splits_backward;
  limits.graphed =
      graphed_limits(request, lists, c.recompute, limits.split_backward, c.stages * c.dp_width);
  if (!request.model_variants.empty()) {
    limits.recompute_stage = c.recompute;  // the runtime's memory model
  } else if (request.has_gpt_shape()) {
    limits.extra_bytes += recompute_workspace_bytes(request.model, request.cluster,
                                                    AnalyticOptions{c.microbatch, c.recompute});
  } else if (c.recompute) {
    // One layer's full activations exist while it is recomputed: the largest layer's.
    for (const auto& layer : layer_costs(*request.profile, c.microbatch)) {
      limits.extra_bytes = std::max(limits.extra_bytes, layer.activation_bytes);
    }
  }
  return limits;
}

// The rejection of a candidate no partition fits: how far the best-balanced one is from fitting.
void reject_for_memory(const std::vector<LayerCost>& layers, const StageLimits& limits,
                       PlanCandidate& c) {
  StageLimits unlimited = limits;
  unlimited.memory_bytes = 1e300;
  const auto best = balanced_partition(layers, c.stages, unlimited);
  const auto& needs = best->stage_memory_bytes;
  const double need = *std::max_element(needs.begin(), needs.end());
  c.peak_memory_bytes = need;
  c.rejected = fmt::format("memory: needs {} per device, has {}", format_bytes(need),
                           format_bytes(limits.memory_bytes));
}

// The simulator's costs of a candidate's d pipeline stages, each with its all-reduce.
struct StageTimings {
  sim::CostModel costs;
  std::vector<double> device_allreduce_ms;
  double slowest_compute_s = 0, slowest_allreduce_s = 0;
};

StageTimings stage_timings(const PlanRequest& request, const std::vector<LayerCost>& layers,
                           const PlanCandidate& c, const Placement& placement, bool split_backward) {
  const ClusterSpec& cluster = request.cluster;
  sim::CostModel costs;
  costs.stages.clear();
  costs.p2p_latency_ms = placement.p2p_latency * 1e3;
  costs.bandwidth_bytes_per_ms = placement.p2p_bandwidth / 1e3;
  costs.samples_per_microbatch = double(c.microbatch);
  costs.synchronous_updates = request.for_pipetrain_runtime;
  costs.shared_cores = shared_cores(cluster);
  costs.send_post_ms = cluster.measured_send_post_latency_s * 1e3;
  costs.send_post_bytes_per_ms = std::isfinite(cluster.measured_send_post_bandwidth)
                                     ? cluster.measured_send_post_bandwidth / 1e3 : 0.0;
  std::vector<double> device_allreduce_ms;
  double slowest_compute_s = 0, slowest_allreduce_s = 0;
  int first = 0;
  for (int s = 0; s < c.stages; ++s) {
    sim::StageCost stage = model_stage_cost(layers, first, c.partition[s]);
    first += c.partition[s];
    const double allreduce = allreduce_seconds(stage.weight_bytes, c.dp_width,  // gradient bytes
                                               placement.allreduce_bandwidth, placement.allreduce_latency);
    stage.allreduce_ms = allreduce * 1e3;
    device_allreduce_ms.push_back(stage.allreduce_ms);
    const double backward_ms =
        split_backward ? sim::input_pass_ms(stage) + stage.weight_ms : stage.backward_ms;
    slowest_compute_s = std::max(slowest_compute_s, (stage.forward_ms + backward_ms) / 1e3);
    slowest_allreduce_s = std::max(slowest_allreduce_s, allreduce);
    costs.stages.push_back(stage);
  }
  return {std::move(costs), std::move(device_allreduce_ms), slowest_compute_s, slowest_allreduce_s};
}

// Interleaved and the V placements run d x v model stages, cut by the balanced partitioner as
// the runtime cuts them: timed as such, not as even splits of the d stages (whose memory check
// stands). False, with the candidate rejected, when the layers are too few to cut.
bool time_model_stages(const std::vector<LayerCost>& layers, const schedule::Schedule& lists,
                       const StageLimits& limits, PlanCandidate& c, StageTimings& timings) {
  StageLimits timing = limits;
  timing.memory_bytes = 1e300;
  timing.in_flight.clear();  // per device, not per model stage: memory is not checked here
  const int model_stages = c.stages * lists.chunks;
  const bool v = lists.placement == schedule::Placement::V;
  // A V placement balances each device's two stages together (v_balanced_partition).
  const auto cut = model_stages > int(layers.size()) ? std::nullopt
                   : v ? v_balanced_partition(layers, c.stages, timing)
                       : balanced_partition(layers, model_stages, timing);
  if (!cut) {
    c.fits = false;
    c.peak_memory_bytes = 0;  // a rule, not memory: not listed among the misfits
    c.rejected = fmt::format("{} model stages for {} layers", model_stages, layers.size());
    return false;
  }
  c.chunk_partition = cut->layer_counts;
  timings.costs.stages.clear();
  int begin = 0;
  for (size_t s = 0; s < c.chunk_partition.size(); ++s) {
    sim::StageCost stage = model_stage_cost(layers, begin, c.chunk_partition[s]);
    const int device = lists.worker_of_stage(int(s));
    stage.allreduce_ms = timings.device_allreduce_ms[size_t(device)] / lists.chunks;
    begin += c.chunk_partition[s];
    timings.costs.stages.push_back(stage);
  }
  return true;
}

// Simulates a partitioned candidate: its worst worker's memory against the device, its rate and
// where its time goes.
void simulate_candidate(const PlanRequest& request, const std::vector<LayerCost>& layers,
                        const schedule::Schedule& lists, const StageLimits& limits, bool flushes,
                        const StageTimings& timings, PlanCandidate& c) {
  c.costs = timings.costs;
  const bool runtime_memory = !request.model_variants.empty();
  if (runtime_memory) set_held_activations(c.costs, layers, c, limits);
  const sim::SimResult result = sim::simulate(lists, c.costs);
  c.peak_memory_bytes = worker_peak_memory(layers, c, limits, lists, result, flushes, runtime_memory);
  if (c.peak_memory_bytes > limits.memory_bytes) {
    c.rejected = fmt::format("memory: its schedule holds {} per device, has {}",
                             format_bytes(c.peak_memory_bytes), format_bytes(limits.memory_bytes));
    return;
  }
  c.fits = true;
  c.iteration_s = result.iteration_ms / 1e3;
  const double samples = double(request.global_batch);
  c.samples_per_s = samples / c.iteration_s;
  c.compute_s_per_sample = timings.slowest_compute_s * double(c.microbatches) / samples;
  c.allreduce_s_per_sample = timings.slowest_allreduce_s / samples;
  c.other_s_per_sample = std::max(0.0, c.iteration_s / samples - c.compute_s_per_sample - c.allreduce_s_per_sample);
}

}  // namespace

PlanCandidate evaluate_candidate(const PlanRequest& request, const std::string& schedule,
                                 int stages, int64_t microbatch, bool recompute, int variant) {
  PlanCandidate c;
  c.schedule = schedule;
  c.variant = variant;
  c.stages = stages;
  c.dp_width = request.cluster.devices() / stages;
  c.microbatch = microbatch;
  c.recompute = recompute;
  c.microbatches = request.global_batch / (microbatch * c.dp_width);
  const schedule::ScheduleEntry& entry = schedule::schedule_entry(schedule);
  c.schedule_spec = candidate_spec(request, entry, c);
  c.rejected = entry.check(c.schedule_spec);
  if (entry.planner.chunks > 1 && stages == 1) c.rejected = fmt::format("{} needs d > 1", schedule);
  const std::string refusal = runtime_refusal(request, entry, c);
  if (!refusal.empty()) c.rejected = refusal;
  if (!c.rejected.empty()) return c;

  const schedule::Schedule lists = schedule::make_schedule(c.schedule_spec);
  const std::vector<LayerCost> layers = candidate_layers(request, variant, microbatch, recompute);
  const Placement placement = place(request.cluster, stages, c.dp_width);
  const StageLimits limits = candidate_limits(request, entry, lists, c, placement);
  if (stages > static_cast<int>(layers.size())) {
    c.rejected = fmt::format("{} stages for {} layers", stages, layers.size());
    return c;
  }
  const auto partition = balanced_partition(layers, stages, limits);
  if (!partition) {
    reject_for_memory(layers, limits, c);
    return c;
  }
  c.partition = partition->layer_counts;
  c.peak_memory_bytes = *std::max_element(partition->stage_memory_bytes.begin(),
                                          partition->stage_memory_bytes.end());
  StageTimings timings = stage_timings(request, layers, c, placement, limits.split_backward);
  if (lists.chunks > 1 && !time_model_stages(layers, lists, limits, c, timings)) return c;
  simulate_candidate(request, layers, lists, limits, entry.flushes(), timings, c);
  return c;
}

PlanResult plan_training(const PlanRequest& request) {
  if (request.global_batch < 1) fail("global batch must be positive");
  if (!request.worker_counts.empty()) {
    PlanResult all;
    for (int workers : request.worker_counts) {
      PlanRequest one = request;
      one.worker_counts.clear();
      one.cluster.nodes = 1;
      one.cluster.devices_per_node = workers;
      PlanResult result = plan_training(one);
      for (auto* list : {&result.ranked, &result.infeasible}) {
        auto& into = list == &result.ranked ? all.ranked : all.infeasible;
        into.insert(into.end(), list->begin(), list->end());
      }
    }
    rank_candidates(all);
    return all;
  }
  const int devices = request.cluster.devices();
  PlanResult result;
  const std::vector<std::string> planned = schedule::schedule_names_where(
      [](const schedule::ScheduleEntry& e) { return e.planner.plans; });
  const auto& schedules = request.schedules.empty() ? planned : request.schedules;
  const int variants = std::max<int>(1, int(request.model_variants.size()));
  for (int stages = 1; stages <= devices; ++stages) {
    if (devices % stages != 0 || stages > planned_layer_count(request)) continue;
    const int width = devices / stages;
    for (int64_t b : request.microbatch_sizes) {
      if (request.global_batch % (b * width) != 0) continue;
      for (bool recompute : request.recompute) {
        for (int variant = 0; variant < variants; ++variant) {
          for (const auto& schedule : schedules) {
            // d = 1 is plain data parallelism: one schedule stands for all.
            if (stages == 1 && !schedule::schedule_entry(schedule).planner.one_stage) continue;
            PlanCandidate c = evaluate_candidate(request, schedule, stages, b, recompute, variant);
            (c.fits ? result.ranked : result.infeasible).push_back(std::move(c));
          }
        }
      }
    }
  }
  rank_candidates(result);
  return result;
}

}  // namespace pipetrain::plan
