#pragma once
// The 2BW planner: for a model, a cluster and a global batch, search pipeline depth d,
// data-parallel width w (d * w = devices), microbatch size b, recomputation and schedule;
// partition each candidate with the balanced partitioner, simulate its schedule, drop what does
// not fit in device memory, and rank the rest by predicted throughput.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "plan/analytic.h"
#include "plan/cluster.h"
#include "plan/profile_json.h"
#include "schedule/schedule.h"
#include "sim/cost_model.h"

namespace pipetrain::plan {

struct PlanRequest {
  // A GPT shape; for a model that is no GPT (`pipetrain plan --config`), only its name, with
  // layers = 0, and its own per-layer costs in `profile`.
  GptShape model;
  // The model.kind a run of the plan must have ("gpt" for the GPT shapes; empty: not checked).
  std::string model_kind;
  // Layer costs instead of the GPT formulas: measured (`pipetrain profile`) or the model's own
  // analytic costs (Model::layer_work, via runtime::model_profile).
  std::optional<ModelProfile> profile;
  ClusterSpec cluster;
  int64_t global_batch = 256;
  std::vector<std::string> schedules;  // empty: every schedule the catalogue plans
  std::vector<int64_t> microbatch_sizes = {1, 2, 4, 8, 16, 32};
  std::vector<bool> recompute = {false, true};
  // Plan for pipetrain's runtime: its updates synchronise all stages (sim::CostModel's
  // synchronous_updates), and only what the catalogue says it runs (RuntimeSupport). On for
  // plans from a measured profile (they run here), off for the papers' clusters.
  bool for_pipetrain_runtime = false;
  // A model run here (`plan --config`): its per-layer costs at a microbatch size (times at one
  // worker's rate, the runtime's memory: runtime::model_plan_costs), one entry per variant of
  // its config the planner may choose (as configured; with chunked cross-entropy). A plan
  // carries its variant's config fields. Takes precedence over `profile`.
  struct ModelVariant {
    std::string label;  // "" for the config as given
    std::vector<std::pair<std::string, std::string>> config_fields;
    std::function<std::vector<LayerCost>(int64_t microbatch)> costs;
  };
  std::vector<ModelVariant> model_variants;
  // train.cuda_graphs: pipeline workers hold their captured passes' memory pools
  // (plan/graph_memory.h). Set by `plan --config` from the run config.
  bool cuda_graphs = false;
  // Worker counts to plan for on one node whose cores they share (a per-worker memory budget
  // on this machine); empty: exactly cluster.devices().
  std::vector<int> worker_counts;

  // A GPT shape (named, or a measured GPT profile's), or a model known only by its per-layer
  // costs (`pipetrain plan --config`, any model kind).
  bool has_gpt_shape() const { return model.layers > 0; }
};

struct PlanCandidate {
  std::string schedule;
  int variant = 0;  // PlanRequest::model_variants index
  int stages = 1, dp_width = 1;
  int64_t microbatch = 1, microbatches = 1;
  bool recompute = false;
  std::vector<int> partition;     // layers per stage over [embedding, blocks, head]
  // Interleaved: layers per model stage (chunk x d + device), the balanced cut the runtime runs.
  std::vector<int> chunk_partition;
  bool fits = false;
  std::string rejected;           // why it cannot run (memory, m < d, ...)
  double samples_per_s = 0;
  double iteration_s = 0;
  double peak_memory_bytes = 0;   // worst device
  std::vector<double> worker_memory_bytes;  // per pipeline worker (plans of models run here)
  double compute_s_per_sample = 0, allreduce_s_per_sample = 0, other_s_per_sample = 0;
  std::string lost_because;       // against the best plan
  // What the prediction simulated (fitting candidates): re-simulate for the timeline.
  schedule::ScheduleSpec schedule_spec;
  sim::CostModel costs;
};

struct PlanResult {
  std::vector<PlanCandidate> ranked;      // feasible, best first
  std::vector<PlanCandidate> infeasible;
};

PlanResult plan_training(const PlanRequest& request);
// The simulator's cost of layers [first, first + count) as one model stage (no all-reduce).
sim::StageCost model_stage_cost(const std::vector<LayerCost>& layers, int first, int count);
PlanCandidate evaluate_candidate(const PlanRequest& request, const std::string& schedule,
                                 int stages, int64_t microbatch, bool recompute, int variant = 0);
// The layers a partition cuts (a GPT shape's: embedding, blocks, head), the most stages a plan has.
int planned_layer_count(const PlanRequest& request);
// The model's parameter count: the GPT shape's, or from the profile's fp32 parameter bytes.
double planned_parameters(const PlanRequest& request);

}  // namespace pipetrain::plan
