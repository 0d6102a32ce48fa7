#include "plan/token_slicer.h"

#include <algorithm>
#include <limits>

#include "core/error.h"

namespace pipetrain::plan {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

}  // namespace

std::vector<int64_t> slice_boundaries(int64_t sequence_length, int64_t granularity) {
  std::vector<int64_t> points;
  for (int64_t p = 0; p < sequence_length; p += granularity) points.push_back(p);
  points.push_back(sequence_length);
  return points;
}

SliceLatencyTable slice_latency_table(const std::vector<int64_t>& points, const SliceCost& cost) {
  const size_t n = points.size();
  SliceLatencyTable t(n, std::vector<double>(n, kInfinity));
  for (size_t j = 0; j < n; ++j)
    for (size_t i = j + 1; i < n; ++i) t[j][i] = cost(points[i] - points[j], points[j]);
  return t;
}

SlicingUnderLimit cheapest_slicing_under(const SliceLatencyTable& t,
                                         const std::vector<int64_t>& points, double t_max) {
  const size_t n = points.size();
  std::vector<double> sum(n, kInfinity);
  std::vector<size_t> previous(n, 0);
  sum[0] = 0;
  for (size_t i = 1; i < n; ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (t[j][i] > t_max || sum[j] == kInfinity) continue;
      if (sum[j] + t[j][i] < sum[i]) sum[i] = sum[j] + t[j][i], previous[i] = j;
    }
  }
  SlicingUnderLimit out{sum[n - 1], {}};
  if (out.sum_s == kInfinity) return out;
  for (size_t i = n - 1; i > 0; i = previous[i]) out.slices.push_back(points[i] - points[previous[i]]);
  std::reverse(out.slices.begin(), out.slices.end());
  return out;
}

double slicing_objective(const std::vector<int64_t>& slices, const SliceCost& cost, int stages) {
  double sum = 0, slowest = 0;
  int64_t context = 0;
  for (int64_t length : slices) {
    const double t = cost(length, context);
    sum += t;
    slowest = std::max(slowest, t);
    context += length;
  }
  return sum + (stages - 1) * slowest;
}

void check_slice_granularity(int64_t granularity, int64_t sequence_length) {
  if (granularity < 1) fail("--granularity must be at least 1, got {}", granularity);
  if (granularity > sequence_length) {
    fail("--granularity {} is longer than the sequence of {} tokens", granularity, sequence_length);
  }
}

Slicing optimal_token_slicing(int64_t sequence_length, int stages, const SliceCost& cost,
                              int64_t granularity) {
  if (stages < 1) fail("token slicing needs at least one stage");
  return optimal_token_slicing_weighted(sequence_length, stages - 1, cost, granularity);
}

Slicing optimal_token_slicing_weighted(int64_t sequence_length, double max_weight,
                                       const SliceCost& cost, int64_t granularity) {
  if (sequence_length < 1 || max_weight < 0 || granularity < 1) {
    fail("token slicing needs a positive sequence length, stage count and granularity");
  }
  const auto points = slice_boundaries(sequence_length, granularity);
  const SliceLatencyTable t = slice_latency_table(points, cost);
  std::vector<double> candidates;
  for (const auto& row : t)
    for (double v : row)
      if (v != kInfinity) candidates.push_back(v);
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  Slicing best;
  best.total_s = kInfinity;
  for (double t_max : candidates) {
    if (max_weight * t_max > best.total_s) break;  // the stopping rule
    ++best.candidates_tried;
    auto under = cheapest_slicing_under(t, points, t_max);
    if (under.sum_s == kInfinity) continue;
    const double total = under.sum_s + max_weight * t_max;
    if (total < best.total_s) best.total_s = total, best.slices = std::move(under.slices);
  }
  // Report the true objective (the slowest slice may be below the t_max that found it).
  double sum_s = 0;
  int64_t context = 0;
  for (int64_t length : best.slices) {
    const double t = cost(length, context);
    sum_s += t;
    best.max_slice_s = std::max(best.max_slice_s, t);
    context += length;
  }
  best.total_s = sum_s + max_weight * best.max_slice_s;
  return best;
}

Slicing uniform_token_slicing(int64_t sequence_length, int64_t slice_count, int stages,
                              const SliceCost& cost) {
  if (slice_count < 1 || slice_count > sequence_length) {
    fail("cannot cut {} tokens into {} slices", sequence_length, slice_count);
  }
  Slicing slicing;
  for (int64_t i = 0; i < slice_count; ++i) {
    slicing.slices.push_back(sequence_length / slice_count + (i < sequence_length % slice_count ? 1 : 0));
  }
  slicing.total_s = slicing_objective(slicing.slices, cost, stages);
  return slicing;
}

BatchSplit optimal_batch_split(int64_t batch,
                               const std::function<double(int64_t)>& microbatch_time) {
  if (batch < 1) fail("batch size must be positive, got {}", batch);
  std::vector<double> best(batch + 1, kInfinity);
  std::vector<int64_t> choice(batch + 1, 0);
  best[0] = 0;
  for (int64_t total = 1; total <= batch; ++total) {
    for (int64_t size = 1; size <= total; ++size) {
      const double value = best[total - size] + microbatch_time(size);
      if (value < best[total]) best[total] = value, choice[total] = size;
    }
  }
  BatchSplit split;
  split.total_s = best[batch];
  for (int64_t rest = batch; rest > 0; rest -= choice[rest]) split.microbatch_sizes.push_back(choice[rest]);
  return split;
}

}  // namespace pipetrain::plan
