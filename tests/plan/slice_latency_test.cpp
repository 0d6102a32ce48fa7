// The fitted TeraPipe slice-latency model: exact on data that follow it, and the plan built on it.
#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/slice_latency.h"

namespace pipetrain::plan {
namespace {

constexpr double kA = 2e-7, kB = 1e-7, kG = 2e-9;

double base_seconds(int64_t l) { return 1e-4 + 2e-6 * double(l) + 1e-9 * double(l * l); }

// Measurements that follow the model exactly (t(l, 0) is not linear in l: interpolation only).
std::vector<SlicePoint> synthetic_points(int64_t seq_len) {
  std::vector<SlicePoint> points;
  for (int64_t c : {int64_t(0), seq_len / 8, seq_len / 4, seq_len / 2, 3 * seq_len / 4}) {
    for (int64_t l = 8; l <= seq_len; l *= 2) {
      if (l + c > seq_len) continue;
      const double context = c > 0 ? kA * double(l) + kB * double(c) + kG * double(l * c) : 0;
      points.push_back({l, c, base_seconds(l) + context});
    }
  }
  return points;
}

SliceProfile synthetic_profile(int64_t seq_len, int64_t layers) {
  SliceProfile profile;
  profile.d_model = 64;
  profile.heads = 4;
  profile.layers = layers;
  profile.seq_len = seq_len;
  profile.batch = 1;
  profile.points = synthetic_points(seq_len);
  profile.fit = fit_slice_latency(profile.points);
  return profile;
}

TEST(SliceLatencyFit, RecoversTheCoefficientsOfDataThatFollowTheModel) {
  const SliceLatencyFit fit = fit_slice_latency(synthetic_points(256));
  EXPECT_NEAR(fit.per_token, kA, 1e-4 * kA);
  EXPECT_NEAR(fit.per_context, kB, 1e-4 * kB);
  EXPECT_NEAR(fit.per_token_context, kG, 1e-4 * kG);
  EXPECT_LT(fit.max_error, 1e-9);
  EXPECT_EQ(fit.base.size(), 6u);  // lengths 8 .. 256
}

TEST(SliceLatencyFit, InterpolatesTheBaseBetweenMeasuredLengths) {
  const SliceLatencyFit fit = fit_slice_latency(synthetic_points(256));
  EXPECT_NEAR(fit(48, 0), 0.5 * (base_seconds(32) + base_seconds(64)), 1e-15);
  EXPECT_NEAR(fit(4, 0), 0.5 * base_seconds(8), 1e-15);  // proportional below the grid
  EXPECT_NEAR(fit(48, 64), fit(48, 0) + kA * 48 + kB * 64 + kG * 48 * 64, 1e-12);
}

TEST(SliceLatencyFit, ReportsTheErrorOfDataOffTheModel) {
  auto points = synthetic_points(256);
  points.back().seconds *= 1.5;  // one outlier with context
  const SliceLatencyFit fit = fit_slice_latency(points);
  EXPECT_GT(fit.max_error, 0.05);
  EXPECT_LT(fit.mean_error, fit.max_error);
}

TEST(SliceLatencyFit, NeedsMeasurementsWithoutContext) {
  EXPECT_THROW(fit_slice_latency({{8, 8, 1.0}}), UserError);
}

TEST(SliceProfile, SurvivesItsJsonForm) {
  const SliceProfile profile = synthetic_profile(128, 4);
  const SliceProfile back = slice_profile_from_json(to_json(profile), "test");
  EXPECT_EQ(back.points.size(), profile.points.size());
  EXPECT_EQ(back.seq_len, 128);
  EXPECT_EQ(back.layers, 4);
  EXPECT_DOUBLE_EQ(back.fit.per_token_context, profile.fit.per_token_context);
  EXPECT_THROW(slice_profile_from_json(nlohmann::json{{"format", "other"}}, "x"), UserError);
}

TEST(MeasuredSlicingPlan, DpBeatsUniformBeatsNoSlicingOnTwoStages) {
  const SliceProfile profile = synthetic_profile(1024, 4);
  const MeasuredSlicingPlan plan = plan_measured_slicing(profile, 2, 1);
  EXPECT_EQ(plan.blocks_per_stage, 2);
  // No slicing on K stages with M microbatches: (M + K - 1) whole-sequence times.
  EXPECT_NEAR(plan.unsliced_s, 2 * 2 * profile.fit(1024, 0), 1e-12);
  EXPECT_LT(plan.uniform_s, plan.unsliced_s);
  EXPECT_LE(plan.dp_s, plan.uniform_s + 1e-12);
  int64_t covered = 0;
  for (int64_t s : plan.dp_slices) covered += s;
  EXPECT_EQ(covered, 1024);
  ASSERT_GE(plan.dp_slices.size(), 2u);
  EXPECT_GE(plan.dp_slices.front(), plan.dp_slices.back());  // longer context, shorter slices
}

TEST(MeasuredSlicingPlan, OneStageKeepsTheSequenceWhole) {
  const MeasuredSlicingPlan plan = plan_measured_slicing(synthetic_profile(256, 2), 1, 1);
  EXPECT_EQ(plan.dp_slices, (std::vector<int64_t>{256}));
  EXPECT_DOUBLE_EQ(plan.dp_s, plan.unsliced_s);
}

}  // namespace
}  // namespace pipetrain::plan
