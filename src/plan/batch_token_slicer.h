#pragma once
// TeraPipe's joint plan (REFERENCE.md section 3): split a batch of B sequences into microbatches
// of possibly different sizes and cut each microbatch's sequence into token slices, minimising
// T = sum over every (microbatch, slice) of t + (K - 1) * max t. For each candidate t_max
// (ascending; stop once (K - 1) * t_max alone exceeds the best T) a token DP gives f_b, the
// cheapest slicing of a microbatch of b sequences whose slices all take <= t_max, and the batch
// DP g(B') = min_b g(B' - b) + f_b combines them: T(t_max) = g(B) + (K - 1) * t_max.
#include <cstdint>
#include <functional>
#include <vector>

namespace pipetrain::plan {

// Latency of a slice of `length` tokens of `batch` sequences after `context` earlier tokens.
using BatchSliceCost = std::function<double(int64_t batch, int64_t length, int64_t context)>;

struct BatchAndTokenSlicing {
  std::vector<int64_t> microbatch_sizes;     // in pipeline order (largest first)
  std::vector<std::vector<int64_t>> slices;  // each microbatch's slice lengths
  double total_s = 0;                        // the objective T
  double max_slice_s = 0;
  int candidates_tried = 0;
  // False when there were more distinct slice latencies than `max_candidates`: then t_max runs
  // over evenly spaced ranks of them (and the slowest slice of the equal-microbatch plan, if
  // given), so the result is the best over those, not a proven optimum.
  bool exhaustive = true;
};

BatchAndTokenSlicing optimal_batch_and_token_slicing(int64_t batch, int64_t sequence_length,
                                                     int stages, const BatchSliceCost& cost,
                                                     int64_t granularity = 8,
                                                     size_t max_candidates = 400,
                                                     std::vector<double> extra_candidates = {});

}  // namespace pipetrain::plan
