#include "plan/batch_token_slicer.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "plan/token_slicer.h"

namespace pipetrain::plan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Every distinct latency, or evenly spaced ranks of them when there are too many.
std::vector<double> t_max_candidates(const std::vector<SliceLatencyTable>& tables, size_t limit,
                                     const std::vector<double>& extra, bool& exhaustive) {
  std::vector<double> all;
  for (const auto& t : tables)
    for (const auto& row : t)
      for (double v : row)
        if (v != kInfinity) all.push_back(v);
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  exhaustive = all.size() <= limit;
  if (exhaustive) return all;
  std::vector<double> picked(extra);
  for (size_t k = 0; k < limit; ++k) picked.push_back(all[k * (all.size() - 1) / (limit - 1)]);
  std::sort(picked.begin(), picked.end());
  return picked;
}

// Largest microbatches first (any order gives the same T).
void sort_largest_microbatches_first(BatchAndTokenSlicing& best) {
  std::vector<size_t> order(best.microbatch_sizes.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return best.microbatch_sizes[a] > best.microbatch_sizes[b];
  });
  BatchAndTokenSlicing sorted = best;
  for (size_t k = 0; k < order.size(); ++k) {
    sorted.microbatch_sizes[k] = best.microbatch_sizes[order[k]];
    sorted.slices[k] = best.slices[order[k]];
  }
  best = std::move(sorted);
}

// The true objective: the slowest slice may be below the t_max that found the plan.
void score_by_slowest_slice(BatchAndTokenSlicing& best, const BatchSliceCost& cost, int stages) {
  double sum = 0;
  for (size_t k = 0; k < best.slices.size(); ++k) {
    int64_t context = 0;
    for (int64_t length : best.slices[k]) {
      const double t = cost(best.microbatch_sizes[k], length, context);
      sum += t, best.max_slice_s = std::max(best.max_slice_s, t), context += length;
    }
  }
  best.total_s = sum + (stages - 1) * best.max_slice_s;
}

}  // namespace

BatchAndTokenSlicing optimal_batch_and_token_slicing(int64_t batch, int64_t sequence_length,
                                                     int stages, const BatchSliceCost& cost,
                                                     int64_t granularity, size_t max_candidates,
                                                     std::vector<double> extra_candidates) {
  if (batch < 1 || sequence_length < 1 || stages < 1 || granularity < 1 || max_candidates < 2) {
    fail("batch and token slicing needs a positive batch, sequence length, stage count and "
         "granularity");
  }
  const auto points = slice_boundaries(sequence_length, granularity);
  std::vector<SliceLatencyTable> tables(size_t(batch) + 1);  // index: microbatch size
  for (int64_t b = 1; b <= batch; ++b) {
    tables[b] = slice_latency_table(points, [&](int64_t l, int64_t c) { return cost(b, l, c); });
  }
  BatchAndTokenSlicing best;
  best.total_s = kInfinity;
  const auto candidates = t_max_candidates(tables, max_candidates, extra_candidates, best.exhaustive);
  std::vector<SlicingUnderLimit> per_size(size_t(batch) + 1);
  std::vector<double> g(size_t(batch) + 1);
  std::vector<int64_t> choice(size_t(batch) + 1);
  for (double t_max : candidates) {
    if ((stages - 1) * t_max > best.total_s) break;  // the stopping rule
    ++best.candidates_tried;
    for (int64_t b = 1; b <= batch; ++b) per_size[b] = cheapest_slicing_under(tables[b], points, t_max);
    std::fill(g.begin(), g.end(), kInfinity);
    g[0] = 0;
    for (int64_t total = 1; total <= batch; ++total)
      for (int64_t b = 1; b <= total; ++b)
        if (g[total - b] + per_size[b].sum_s < g[total]) g[total] = g[total - b] + per_size[b].sum_s, choice[total] = b;
    if (g[batch] == kInfinity || g[batch] + (stages - 1) * t_max >= best.total_s) continue;
    best.total_s = g[batch] + (stages - 1) * t_max;
    best.microbatch_sizes.clear();
    best.slices.clear();
    for (int64_t rest = batch; rest > 0; rest -= choice[rest]) {
      best.microbatch_sizes.push_back(choice[rest]);
      best.slices.push_back(per_size[choice[rest]].slices);
    }
  }
  sort_largest_microbatches_first(best);
  score_by_slowest_slice(best, cost, stages);
  return best;
}

}  // namespace pipetrain::plan
