#include "plan/partition.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "plan/graph_memory.h"

namespace pipetrain::plan {
namespace {
constexpr double kInfinity = std::numeric_limits<double>::infinity();
}

double stage_time(const std::vector<LayerCost>& layers, int first, int last, bool last_stage,
                  const StageLimits& limits) {
  const bool split = limits.split_backward && first > 0;
  double compute = 0;
  for (int i = first; i < last; ++i) compute += layers[i].forward_s + stage_backward_s(layers[i], split);
  if (last_stage) return compute;
  // The boundary activation goes forward and its gradient (same size) comes back.
  const double transfer = limits.link_latency_s + layers[last - 1].output_bytes / limits.link_bandwidth;
  return compute + 2 * transfer;
}

StageMemoryParts stage_memory_parts(const std::vector<LayerCost>& layers, int first, int last,
                                    const StageLimits& limits) {
  StageMemoryParts parts;
  double activations = 0;
  for (int i = first; i < last; ++i) {
    const LayerCost& layer = layers[size_t(i)];
    parts.weights += layer.param_bytes;
    parts.optimizer += layer.optimizer_bytes;
    if (layer.shared_with >= 0 && (layer.shared_with < first || layer.shared_with >= last)) {
      parts.weights += layer.shared_param_bytes;
      parts.optimizer += layer.shared_optimizer_bytes;
    }
    activations += layer.activation_bytes;
    parts.workspace = std::max(parts.workspace, layer.workspace_bytes);
    parts.optimizer_workspace = std::max(parts.optimizer_workspace, layer.optimizer_workspace_bytes);
  }
  // A layer's workspace meets its own microbatch's activations of the layers up to it only: the
  // later layers' are not made yet (its forward) or freed already (its backward). A split
  // backward's B keeps them for W: each layer's B peaks beside what the later ones recorded and
  // the gradient arriving from the next layer or stage (a loss's: a scalar).
  double later = 0, recorded = 0, input_peak = 0;
  bool split_known = true;
  for (int i = last - 1; i >= first; --i) {
    const LayerCost& layer = layers[size_t(i)];
    parts.eager_workspace = std::max(parts.eager_workspace, layer.workspace_bytes - later);
    const double backward = layer.backward_workspace_bytes >= 0 ? layer.backward_workspace_bytes : layer.workspace_bytes;
    parts.backward_workspace = std::max(parts.backward_workspace, backward - later);
    later += layer.activation_bytes;
    const double incoming = i + 1 < int(layers.size()) ? layer.output_bytes : 0;
    split_known = split_known && layer.input_pass_peak_bytes >= 0 && layer.weight_workspace_bytes >= 0;
    input_peak = std::max(input_peak, recorded + incoming + layer.input_pass_peak_bytes);
    recorded += layer.weight_pass_bytes;
    parts.weight_workspace = std::max(parts.weight_workspace, layer.weight_workspace_bytes);
  }
  parts.input_workspace = std::max(0.0, input_peak - recorded);
  if (!split_known) parts.input_workspace = parts.weight_workspace = parts.eager_workspace;
  if (limits.recompute_stage) parts.backward_workspace = parts.eager_workspace;
  const double input = layers[size_t(first)].input_bytes;
  parts.per_microbatch = limits.recompute_stage ? input : input + activations;
  parts.once = limits.recompute_stage ? activations : 0;
  return parts;
}

double weight_gradient_s(const LayerCost& layer) {
  return layer.weight_s >= 0 ? layer.weight_s : layer.backward_s / 2;
}

double input_gradient_s(const LayerCost& layer) {
  return layer.input_s >= 0 ? layer.input_s : layer.backward_s - weight_gradient_s(layer);
}

double stage_backward_s(const LayerCost& layer, bool split) {
  return split ? input_gradient_s(layer) + weight_gradient_s(layer) : layer.backward_s;
}

double stage_memory(const std::vector<LayerCost>& layers, int first, int last, int stage,
                    int stages, const StageLimits& limits) {
  const double in_flight = !limits.in_flight.empty() ? limits.in_flight.at(size_t(stage))
                           : limits.gpipe_memory     ? limits.microbatches
                                                     : std::min(stages - stage, limits.microbatches);
  const StageMemoryParts parts = stage_memory_parts(layers, first, last, limits);
  const double held = in_flight * parts.per_microbatch + parts.once + parts.eager_workspace +
                      parts.optimizer_workspace;
  // Weight versions, and a no-flush schedule's second gradient set (as large as the weights).
  const int copies = limits.weight_versions + (limits.second_gradient_set ? 1 : 0);
  if (!limits.graphed) return copies * parts.weights + parts.optimizer + held + limits.extra_bytes;
  const StageLimits::Graphed& graphed = *limits.graphed;
  const GraphedChunk chunk{parts, layers[size_t(first)].input_bytes,
                           layers[size_t(last - 1)].output_bytes, in_flight, graphed.shared_pool};
  return (copies + (graphed.extra_weight_copy ? 1 : 0)) * parts.weights + parts.optimizer +
         graphed_held_bytes({chunk}, parts.optimizer_workspace, graphed.flushes ? 0 : held) +
         limits.extra_bytes;
}

std::optional<Partition> balanced_partition(const std::vector<LayerCost>& layers, int stages,
                                            const StageLimits& limits) {
  const int n = static_cast<int>(layers.size());
  if (stages < 1 || stages > n) fail("cannot cut {} layers into {} stages", n, stages);
  // best[k][i]: the smallest bottleneck putting layers [0, i) on stages 0..k-1.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, kInfinity));
  std::vector<std::vector<int>> cut(stages + 1, std::vector<int>(n + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= stages; ++k) {
    const bool last_stage = k == stages;
    for (int i = k; i <= n - (stages - k); ++i) {
      if (last_stage && i != n) continue;
      for (int j = k - 1; j < i; ++j) {
        if (best[k - 1][j] == kInfinity) continue;
        if (stage_memory(layers, j, i, k - 1, stages, limits) > limits.memory_bytes) continue;
        const double value = std::max(best[k - 1][j], stage_time(layers, j, i, last_stage, limits));
        if (value < best[k][i]) best[k][i] = value, cut[k][i] = j;
      }
    }
  }
  if (best[stages][n] == kInfinity) return std::nullopt;
  std::vector<int> counts(stages);
  for (int k = stages, i = n; k > 0; i = cut[k][i], --k) counts[k - 1] = i - cut[k][i];
  return evaluate_partition(layers, counts, limits);
}

Partition evaluate_partition(const std::vector<LayerCost>& layers,
                             const std::vector<int>& layer_counts, const StageLimits& limits) {
  Partition partition;
  partition.layer_counts = layer_counts;
  const int stages = static_cast<int>(layer_counts.size());
  int first = 0;
  for (int s = 0; s < stages; ++s) {
    const int last = first + layer_counts[s];
    if (layer_counts[s] < 1 || last > static_cast<int>(layers.size())) {
      fail("partition gives stage {} {} layers; every stage needs at least one of the {}", s,
           layer_counts[s], layers.size());
    }
    partition.stage_time_s.push_back(stage_time(layers, first, last, s == stages - 1, limits));
    partition.stage_memory_bytes.push_back(stage_memory(layers, first, last, s, stages, limits));
    first = last;
  }
  if (first != static_cast<int>(layers.size())) {
    fail("partition covers {} layers, the model has {}", first, layers.size());
  }
  partition.bottleneck_s =
      *std::max_element(partition.stage_time_s.begin(), partition.stage_time_s.end());
  return partition;
}

std::vector<int> equal_layer_counts(int layers, int stages) {
  std::vector<int> counts(stages, layers / stages);
  for (int s = 0; s < layers % stages; ++s) ++counts[stages - 1 - s];
  return counts;
}

}  // namespace pipetrain::plan
