#pragma once
// Which layers of the model's layer list each pipeline stage holds: explicit counts ("3,3") or
// balanced by the layers' analytic compute. No libtorch in this header, so the CLI can use it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "plan/partition.h"

namespace pipetrain {
class Model;
}

namespace pipetrain::runtime {

struct StageRange {
  int64_t first = 0, last = 0;  // layers [first, last)
};

// The model's layers' costs for a microbatch (Model::layer_work on a CPU core's FLOP/s and
// memory bandwidth): what the "balanced" partition balances (BaPipe's exact partitioner,
// src/plan/partition.h), so e.g. GPT's logits GEMM and near-free embedding count with their
// true weight.
std::vector<plan::LayerCost> layer_costs(const Model& model, int64_t microbatch);

// The stage ranges for config.pipeline (UserError for a malformed or impossible partition).
std::vector<StageRange> stage_ranges(const Config& config);

// pipeline.recompute: "none", "all", or stage indices "0,2". UserError for anything else.
bool recomputes_stage(const std::string& spec, int64_t stage, int64_t stages);

std::string describe_partition(const std::vector<StageRange>& ranges);

}  // namespace pipetrain::runtime
