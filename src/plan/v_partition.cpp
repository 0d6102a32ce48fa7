// The balanced cut for a V placement (ZB-V, DualPipeV): worker w runs stages w and 2p-1-w, so
// what must be balanced is the sum of each worker's two stages, not each stage. Worker 0 holds
// the outermost segments (a prefix and a suffix of the layers), worker 1 the next pair inwards,
// and worker p-1 the two middle segments: a dynamic programme over the middle interval that is
// left, exact, with the stage times pruning the search.
#include <algorithm>
#include <limits>

#include "core/error.h"
#include "plan/partition.h"

namespace pipetrain::plan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

class VPartitioner {
 public:
  VPartitioner(const std::vector<LayerCost>& layers, int workers, const StageLimits& limits)
      : layers_(layers), n_(int(layers.size())), p_(workers), limits_(limits),
        time_(size_t(n_ + 1) * size_t(n_ + 1), 0.0) {
    for (int i = 0; i < n_; ++i) {
      for (int j = i + 1; j <= n_; ++j) time_[index(i, j)] = stage_time(layers_, i, j, j == n_, limits_);
    }
  }

  // Layer counts of the 2p stages in stage order; empty when no cut fits in memory.
  std::vector<int> solve() {
    best_.assign(size_t(p_), std::vector<double>(size_t(n_ + 1) * size_t(n_ + 1), kInfinity));
    choice_.assign(size_t(p_), std::vector<std::pair<int, int>>(size_t(n_ + 1) * size_t(n_ + 1)));
    for (int k = p_ - 1; k >= 1; --k) {
      for (int i = k; i <= n_; ++i) {
        for (int j = i + 2 * (p_ - k); j <= n_ - k; ++j) fill(k, i, j);
      }
    }
    fill(0, 0, n_);
    if (best_[0][index(0, n_)] == kInfinity) return {};
    std::vector<int> counts(size_t(2 * p_));
    int i = 0, j = n_;
    for (int k = 0; k < p_; ++k) {
      const auto [inner_first, inner_last] = choice_[size_t(k)][index(i, j)];
      counts[size_t(k)] = inner_first - i;
      counts[size_t(2 * p_ - 1 - k)] = j - inner_last;
      i = inner_first, j = inner_last;
    }
    return counts;
  }

 private:
  size_t index(int i, int j) const { return size_t(i) * size_t(n_ + 1) + size_t(j); }
  double time(int i, int j) const { return time_[index(i, j)]; }
  bool fits(int k, int a, int b, int c, int d) const {  // worker k: stages [a, b) and [c, d)
    const int stages = 2 * p_;
    return stage_memory(layers_, a, b, k, stages, limits_) +
               stage_memory(layers_, c, d, stages - 1 - k, stages, limits_) <=
           limits_.memory_bytes;
  }
  // Worker k takes [i, a) and [b, j); workers k+1.. the interval [a, b) (the last worker: a = b,
  // its two stages side by side).
  void fill(int k, int i, int j) {
    double& best = best_[size_t(k)][index(i, j)];
    auto& choice = choice_[size_t(k)][index(i, j)];
    const bool last_worker = k == p_ - 1;
    const int inner_segments = 2 * (p_ - 1 - k);
    for (int a = i + 1; a < j && time(i, a) < best; ++a) {
      const int lowest_b = a + inner_segments;
      for (int b = last_worker ? a : j - 1; b >= lowest_b && time(i, a) + time(b, j) < best; --b) {
        const double inner = last_worker ? 0 : best_[size_t(k + 1)][index(a, b)];
        const double value = std::max(time(i, a) + time(b, j), inner);
        if (value < best && fits(k, i, a, b, j)) best = value, choice = {a, b};
      }
    }
  }

  const std::vector<LayerCost>& layers_;
  int n_, p_;
  const StageLimits& limits_;
  std::vector<double> time_;
  std::vector<std::vector<double>> best_;
  std::vector<std::vector<std::pair<int, int>>> choice_;
};

}  // namespace

double v_worker_bottleneck(const std::vector<double>& stage_times) {
  const size_t stages = stage_times.size();
  double slowest = 0;
  for (size_t w = 0; w < stages / 2; ++w) {
    slowest = std::max(slowest, stage_times[w] + stage_times[stages - 1 - w]);
  }
  return slowest;
}

std::optional<Partition> v_balanced_partition(const std::vector<LayerCost>& layers, int workers,
                                              const StageLimits& limits) {
  if (workers < 1 || 2 * workers > int(layers.size())) {
    fail("cannot cut {} layers into 2 x {} stages", layers.size(), workers);
  }
  const std::vector<int> counts = VPartitioner(layers, workers, limits).solve();
  if (counts.empty()) return std::nullopt;
  Partition partition = evaluate_partition(layers, counts, limits);
  partition.bottleneck_s = v_worker_bottleneck(partition.stage_time_s);
  return partition;
}

}  // namespace pipetrain::plan
