#include "plan/slice_latency.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "core/error.h"

namespace pipetrain::plan {
namespace {

using Vec3 = std::array<double, 3>;

// Solves the 3x3 system a x = b (Gaussian elimination with partial pivoting); a singular system
// (too few distinct points) leaves the unresolved coefficients at zero.
Vec3 solve3(std::array<Vec3, 3> a, Vec3 b) {
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int row = col + 1; row < 3; ++row) {
      if (std::abs(a[row][col]) > std::abs(a[pivot][col])) pivot = row;
    }
    std::swap(a[col], a[pivot]);
    std::swap(b[col], b[pivot]);
    if (std::abs(a[col][col]) < 1e-300) continue;
    for (int row = 0; row < 3; ++row) {
      if (row == col) continue;
      const double factor = a[row][col] / a[col][col];
      for (int k = 0; k < 3; ++k) a[row][k] -= factor * a[col][k];
      b[row] -= factor * b[col];
    }
  }
  Vec3 x{};
  for (int i = 0; i < 3; ++i) x[i] = std::abs(a[i][i]) < 1e-300 ? 0 : b[i] / a[i][i];
  return x;
}

double base_time(const std::vector<SlicePoint>& base, int64_t length) {
  if (length <= base.front().length) {  // proportional below the shortest measured slice
    return base.front().seconds * double(length) / double(base.front().length);
  }
  for (size_t i = 1; i < base.size(); ++i) {
    if (length <= base[i].length) {
      const auto& lo = base[i - 1];
      const auto& hi = base[i];
      const double f = double(length - lo.length) / double(hi.length - lo.length);
      return lo.seconds + f * (hi.seconds - lo.seconds);
    }
  }
  const auto& last = base.back();  // proportional beyond the longest
  return last.seconds * double(length) / double(last.length);
}

}  // namespace

double SliceLatencyFit::operator()(int64_t length, int64_t context) const {
  const double l = double(length), c = double(context);
  const double context_part = context > 0 ? per_token * l + per_context * c + per_token_context * l * c : 0;
  return base_time(base, length) + context_part;
}

SliceLatencyFit fit_slice_latency(const std::vector<SlicePoint>& points) {
  SliceLatencyFit fit;
  for (const auto& p : points) {
    if (p.context == 0) fit.base.push_back(p);
  }
  if (fit.base.empty()) fail("slice latency fit: no measurement with context 0");
  std::sort(fit.base.begin(), fit.base.end(),
            [](const SlicePoint& a, const SlicePoint& b) { return a.length < b.length; });
  // Least squares on the context part: features (l, c, l c), target t(l, c) - t(l, 0).
  std::array<Vec3, 3> normal{};
  Vec3 rhs{};
  for (const auto& p : points) {
    if (p.context == 0) continue;
    const double l = double(p.length), c = double(p.context);
    const Vec3 f{l, c, l * c};
    const double y = p.seconds - base_time(fit.base, p.length);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) normal[i][j] += f[i] * f[j];
      rhs[i] += f[i] * y;
    }
  }
  const Vec3 x = solve3(normal, rhs);
  fit.per_token = x[0];
  fit.per_context = x[1];
  fit.per_token_context = x[2];
  double sum = 0;
  for (const auto& p : points) {
    const double error = std::abs(fit(p.length, p.context) - p.seconds) / p.seconds;
    fit.max_error = std::max(fit.max_error, error);
    sum += error;
  }
  fit.mean_error = points.empty() ? 0 : sum / double(points.size());
  return fit;
}

nlohmann::json to_json(const SliceProfile& profile) {
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : profile.points) points.push_back({p.length, p.context, p.seconds});
  const auto& f = profile.fit;
  return {{"format", "pipetrain-slice-profile-1"},
          {"model", {{"d_model", profile.d_model}, {"heads", profile.heads},
                     {"layers", profile.layers}, {"seq_len", profile.seq_len}}},
          {"batch", profile.batch},
          {"threads", profile.threads},
          {"what", "seconds of forward + backward of one transformer block: [length, context, s]"},
          {"points", points},
          {"fit", {{"per_token", f.per_token}, {"per_context", f.per_context},
                   {"per_token_context", f.per_token_context}, {"max_error", f.max_error},
                   {"mean_error", f.mean_error}}}};
}

SliceProfile slice_profile_from_json(const nlohmann::json& json, const std::string& origin) {
  if (json.value("format", "") != "pipetrain-slice-profile-1") {
    fail("{}: not a slice profile (expected format pipetrain-slice-profile-1; write one with "
         "`pipetrain terapipe-profile --out FILE`)", origin);
  }
  try {
    SliceProfile profile;
    const auto& model = json.at("model");
    profile.d_model = model.at("d_model");
    profile.heads = model.at("heads");
    profile.layers = model.at("layers");
    profile.seq_len = model.at("seq_len");
    profile.batch = json.at("batch");
    profile.threads = json.at("threads");
    for (const auto& p : json.at("points")) profile.points.push_back({p.at(0), p.at(1), p.at(2)});
    profile.fit = fit_slice_latency(profile.points);  // refitted: the points are the truth
    return profile;
  } catch (const nlohmann::json::exception& error) {
    fail("{}: malformed slice profile ({})", origin, error.what());
  }
}

MeasuredSlicingPlan plan_measured_slicing(const SliceProfile& profile, int stages,
                                          int64_t microbatches, int64_t granularity) {
  if (stages < 1 || microbatches < 1) fail("token slicing needs stages >= 1 and microbatches >= 1");
  if (stages > profile.layers) fail("--stages {} is more than the profiled model's {} blocks", stages, profile.layers);
  check_slice_granularity(granularity, profile.seq_len);  // (0 divided the sequence by zero)
  MeasuredSlicingPlan plan;
  plan.blocks_per_stage = (profile.layers + stages - 1) / stages;
  const SliceCost cost = [&](int64_t length, int64_t context) {
    return double(plan.blocks_per_stage) * profile.fit(length, context);
  };
  const auto step_time = [&](const std::vector<int64_t>& slices) {  // M sum + (K - 1) max
    double sum = 0, slowest = 0;
    int64_t context = 0;
    for (const int64_t length : slices) {
      const double t = cost(length, context);
      sum += t, slowest = std::max(slowest, t), context += length;
    }
    return double(microbatches) * sum + double(stages - 1) * slowest;
  };
  const int64_t length = profile.seq_len;
  plan.unsliced_s = step_time({length});
  plan.uniform_s = plan.unsliced_s;
  plan.uniform_slices = {length};
  for (int64_t count = 2; count <= length / granularity; ++count) {
    const auto slices = uniform_token_slicing(length, count, stages, cost).slices;
    const double t = step_time(slices);
    if (t < plan.uniform_s) plan.uniform_s = t, plan.uniform_slices = slices;
  }
  const double max_weight = double(stages - 1) / double(microbatches);
  plan.dp_slices = optimal_token_slicing_weighted(length, max_weight, cost, granularity).slices;
  plan.dp_s = step_time(plan.dp_slices);
  return plan;
}

}  // namespace pipetrain::plan
