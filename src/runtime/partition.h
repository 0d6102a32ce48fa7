#pragma once
// Which layers of the GPT layer list [embedding, blocks..., head] each pipeline stage holds:
// explicit counts ("3,3") or balanced by parameter count. No libtorch, so the CLI can use it.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace pipetrain::runtime {

struct StageRange {
  int64_t first = 0, last = 0;  // layers [first, last)
};

// Parameters of each layer; the head counts the V x D logits matrix it multiplies by, since
// that is where its compute goes even when the weight is tied to the embedding.
std::vector<double> gpt_layer_parameter_counts(const ModelConfig& model);

// Contiguous split of `weights` into `stages` non-empty groups minimising the heaviest group.
std::vector<int64_t> balanced_layer_counts(const std::vector<double>& weights, int64_t stages);

// The stage ranges for config.pipeline (UserError for a malformed or impossible partition).
std::vector<StageRange> stage_ranges(const Config& config);

// pipeline.recompute: "none", "all", or stage indices "0,2". UserError for anything else.
bool recomputes_stage(const std::string& spec, int64_t stage, int64_t stages);

std::string describe_partition(const std::vector<StageRange>& ranges);

}  // namespace pipetrain::runtime
