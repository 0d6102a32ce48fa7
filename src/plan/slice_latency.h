#pragma once
// TeraPipe's latency model of a token slice, fitted to measurements (REFERENCE.md section 3):
// t(l, c) = t(l, 0) + a*l + b*c + g*l*c, where t(l, 0) is measured on a grid of slice lengths
// (linear in between) and a, b, g are a least-squares fit of the context part
// t(l, c) - t(l, 0) over the grid points with c > 0. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plan/token_slicer.h"

namespace pipetrain::plan {

struct SlicePoint {
  int64_t length = 0;   // l: tokens in the slice
  int64_t context = 0;  // c: earlier tokens of the same sequence
  double seconds = 0;   // measured forward + backward time
};

struct SliceLatencyFit {
  std::vector<SlicePoint> base;  // t(l, 0) for the grid's lengths, ascending
  double per_token = 0, per_context = 0, per_token_context = 0;  // a, b, g
  double max_error = 0, mean_error = 0;  // relative, over every measured point

  double operator()(int64_t length, int64_t context) const;
};

// Needs t(l, 0) for at least one length and, to fit the context part, points with c > 0.
SliceLatencyFit fit_slice_latency(const std::vector<SlicePoint>& points);

// What `pipetrain terapipe-profile` writes: the model it measured, the grid and the fit.
struct SliceProfile {
  int64_t d_model = 0, heads = 0, layers = 0, seq_len = 0, batch = 0, threads = 1;
  std::vector<SlicePoint> points;  // one transformer block, forward + backward
  SliceLatencyFit fit;
};
nlohmann::json to_json(const SliceProfile& profile);

// Slicing of the profiled model on `stages` stages (the slowest holds ceil(layers / stages)
// blocks), GPipe over `microbatches` microbatches each cut alike: predicted step time
// M * sum_i t_i + (K - 1) * max_j t_j without slicing, with the best uniform slicing and with
// the DP's slicing.
struct MeasuredSlicingPlan {
  int64_t blocks_per_stage = 0;
  std::vector<int64_t> uniform_slices, dp_slices;
  double unsliced_s = 0, uniform_s = 0, dp_s = 0;
};
MeasuredSlicingPlan plan_measured_slicing(const SliceProfile& profile, int stages,
                                          int64_t microbatches, int64_t granularity = 8);
SliceProfile slice_profile_from_json(const nlohmann::json& json, const std::string& origin);

}  // namespace pipetrain::plan
