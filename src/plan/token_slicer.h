#pragma once
// TeraPipe's token slicing (REFERENCE.md section 3): cut a sequence of L tokens into slices
// l_1..l_n minimising T = sum_i t(l_i, c_i) + (K - 1) * max_j t(l_j, c_j), where c_i is the
// context before slice i. Exact: for every candidate t_max (ascending) a DP finds the cheapest
// slicing whose slices all take <= t_max; stop once (K - 1) * t_max alone exceeds the best T.
#include <cstdint>
#include <functional>
#include <vector>

namespace pipetrain::plan {

// Latency of a slice of `length` tokens after `context` earlier tokens of the same sequence.
using SliceCost = std::function<double(int64_t length, int64_t context)>;

struct Slicing {
  std::vector<int64_t> slices;  // lengths, in sequence order
  double total_s = 0;           // the objective T
  double max_slice_s = 0;
  int candidates_tried = 0;     // t_max values examined before the stopping rule
};

// The pieces both DPs (this one and the joint batch + token DP) are built from.
// UserError unless 1 <= granularity <= sequence_length: the planners divide L by it, and a
// granularity longer than L leaves no slicing to choose.
void check_slice_granularity(int64_t granularity, int64_t sequence_length);

// Slice boundaries allowed: multiples of `granularity`, plus L itself.
std::vector<int64_t> slice_boundaries(int64_t sequence_length, int64_t granularity);
// t[j][i]: the latency of the slice [points[j], points[i]) (infinity unless j < i).
using SliceLatencyTable = std::vector<std::vector<double>>;
SliceLatencyTable slice_latency_table(const std::vector<int64_t>& points, const SliceCost& cost);
// The cheapest slicing whose slices all take <= t_max: summed time (infinity if none) and lengths.
struct SlicingUnderLimit {
  double sum_s;
  std::vector<int64_t> slices;
};
SlicingUnderLimit cheapest_slicing_under(const SliceLatencyTable& t,
                                         const std::vector<int64_t>& points, double t_max);

double slicing_objective(const std::vector<int64_t>& slices, const SliceCost& cost, int stages);

// Slices are multiples of `granularity` tokens (the last may be shorter if L is not a multiple).
Slicing optimal_token_slicing(int64_t sequence_length, int stages, const SliceCost& cost,
                              int64_t granularity = 8);
// The same DP for T = sum_i t_i + max_weight * max_j t_j with any max_weight >= 0 (M microbatches
// sliced alike: M * sum + (K - 1) * max = M * (sum + (K - 1) / M * max)). `total_s` is this T.
Slicing optimal_token_slicing_weighted(int64_t sequence_length, double max_weight,
                                       const SliceCost& cost, int64_t granularity = 8);
Slicing uniform_token_slicing(int64_t sequence_length, int64_t slice_count, int stages,
                              const SliceCost& cost);

// TeraPipe's batch DP: split `batch` sequences into microbatches of possibly different sizes,
// minimising sum of f(b) where f(b) is the best pipeline time of one microbatch of size b.
struct BatchSplit {
  std::vector<int64_t> microbatch_sizes;
  double total_s = 0;
};
BatchSplit optimal_batch_split(int64_t batch, const std::function<double(int64_t)>& microbatch_time);

}  // namespace pipetrain::plan
