#include "runtime/partition.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "model/model.h"
#include "runtime/model_costs.h"

namespace pipetrain::runtime {

std::vector<plan::LayerCost> model_layer_costs(const Model& model, int64_t microbatch) {
  // Only the layers' relative costs matter for the balance: the planner's cost model at its
  // default CPU-core rates (a layer streams its weights and writes its output, so a near-free
  // one still counts; backward twice the forward), fp32 (float64 scales every layer alike).
  return model_plan_costs(model, microbatch, ModelCostOptions{});
}

namespace {

std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> counts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long value = std::stoll(item, &used);
      if (used != item.size() || value < 1) throw std::invalid_argument(item);
      counts.push_back(value);
    } catch (const std::exception&) {
      fail("pipeline.partition: expected \"balanced\", \"measured\" or positive layer counts like "
           "\"3,3\", got '{}'",
           text);
    }
  }
  return counts;
}

}  // namespace

std::vector<int64_t> balanced_layer_counts(const std::vector<plan::LayerCost>& costs, int64_t stages,
                                           const schedule::ScheduleEntry& schedule) {
  plan::StageLimits unlimited;
  unlimited.split_backward = schedule.splits_backward;
  // A V placement (worker w: stages w and 2p-1-w) balances each worker's two stages together.
  const auto partition = schedule.placement() == schedule::Placement::V
                             ? plan::v_balanced_partition(costs, int(stages / 2), unlimited)
                             : plan::balanced_partition(costs, int(stages), unlimited);
  return {partition->layer_counts.begin(), partition->layer_counts.end()};
}

std::vector<StageRange> stage_ranges(const Model& model, const PipelineConfig& pipeline,
                                     int64_t microbatch_rows, const schedule::ScheduleEntry& schedule) {
  const int64_t layers = model.layer_count();
  const std::string layer_list =
      fmt::format("{} .. {}", model.layer_name(0), model.layer_name(layers - 1));
  // With v chunks per worker the model is cut into p * v stages (interleaved schedule).
  const int64_t stages = pipeline.stages * pipeline.chunks;
  if (stages > layers) {
    fail("pipeline.stages x pipeline.chunks ({}) exceeds the model's {} layers ({})", stages,
         layers, layer_list);
  }
  if (pipeline.partition == "measured" && stages > 1) {
    fail("pipeline.partition = \"measured\" is decided by pipetrain's launcher before it starts "
         "the workers; under torchrun give layer counts (pipetrain profile, then plan --profile, "
         "measures them) or \"balanced\"");
  }
  std::vector<int64_t> counts;
  if (pipeline.partition == "balanced" || pipeline.partition == "measured") {
    counts = balanced_layer_counts(model_layer_costs(model, microbatch_rows), stages, schedule);
  } else {
    counts = parse_counts(pipeline.partition);
    double total = 0;  // (in double: counts near 2^63 must not wrap around to the right sum)
    for (int64_t c : counts) total += double(c);
    if (int64_t(counts.size()) != stages || total != double(layers)) {
      fail("pipeline.partition '{}' must give {} counts summing to {} (layers {}), got {} counts "
           "summing to {:.0f}", pipeline.partition, stages, layers, layer_list, counts.size(), total);
    }
  }
  std::vector<StageRange> ranges;
  int64_t first = 0;
  for (int64_t c : counts) {
    ranges.push_back({first, first + c});
    first += c;
  }
  return ranges;
}

std::vector<bool> recomputed_stages(const std::string& spec, int64_t stages) {
  if (spec == "none" || spec == "all") return std::vector<bool>(size_t(stages), spec == "all");
  std::vector<bool> recomputed(size_t(stages), false);
  std::stringstream in(spec + ",");  // so "1," ends with an empty item, an error like ",1"
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long index = -1;
    try {
      index = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || index < 0 || index >= stages) {
      fail("pipeline.recompute: expected \"none\", \"all\" or stage indices 0..{} like \"0,1\", "
           "got '{}'", stages - 1, spec);
    }
    recomputed[size_t(index)] = true;
  }
  return recomputed;
}

std::string describe_partition(const std::vector<StageRange>& ranges) {
  std::string out;
  for (size_t s = 0; s < ranges.size(); ++s) {
    out += fmt::format("{}stage {}: layers {}-{}", s ? ", " : "", s, ranges[s].first,
                       ranges[s].last - 1);
  }
  return out;
}

}  // namespace pipetrain::runtime
