#pragma once
// Which layers of the model's layer list (model/model.h) each pipeline stage holds: explicit
// counts ("3,3") or balanced by the layers' analytic compute (Model::layer_work). No libtorch
// in this header, so the CLI can use it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "plan/partition.h"
#include "schedule/catalogue.h"

namespace pipetrain {
class Model;
}

namespace pipetrain::runtime {

struct StageRange {
  int64_t first = 0, last = 0;  // layers [first, last)
};

// The model's own analytic per-layer costs (Model::layer_work) for a microbatch, as times on a
// CPU core: what the "balanced" partition balances (BaPipe's exact partitioner,
// src/plan/partition.h), so GPT's logits GEMM and near-free embedding, or a CNN's wide
// full-resolution block, count with their true weight.
std::vector<plan::LayerCost> model_layer_costs(const Model& model, int64_t microbatch);

// Layer counts per model stage that balance `costs` over `stages` stages under `schedule`
// (BaPipe's exact partitioner; under a V placement over `stages` / 2 workers, each worker's two
// stages together; a split backward's stages cost forward + B + W).
std::vector<int64_t> balanced_layer_counts(const std::vector<plan::LayerCost>& costs, int64_t stages,
                                           const schedule::ScheduleEntry& schedule);

// The stage ranges of `pipeline` (partition, stages x chunks) over the model's layers, balanced
// for microbatches of `microbatch_rows` rows under `schedule` (balanced_layer_counts; UserError
// for a malformed or impossible partition). "measured" is "balanced" for one stage; for
// several, pipetrain's launcher resolves it to counts first (cli/train_command), so reaching
// here with it (a worker under torchrun) is a UserError. A run asks its RunSpec
// (runtime/run_spec.h), which calls this once.
std::vector<StageRange> stage_ranges(const Model& model, const PipelineConfig& pipeline,
                                     int64_t microbatch_rows, const schedule::ScheduleEntry& schedule);

// pipeline.recompute: "none", "all", or stage indices "0,2", as a flag per model stage.
// UserError for anything else.
std::vector<bool> recomputed_stages(const std::string& spec, int64_t stages);

std::string describe_partition(const std::vector<StageRange>& ranges);

}  // namespace pipetrain::runtime
