#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "plan/token_slicer.h"

namespace pipetrain::plan {
namespace {

void all_slicings(int64_t remaining, int64_t unit, std::vector<int64_t>& prefix,
                  std::vector<std::vector<int64_t>>& out) {
  if (remaining == 0) return out.push_back(prefix);
  for (int64_t length = unit; length <= remaining; length += unit) {
    prefix.push_back(length);
    all_slicings(remaining - length, unit, prefix, out);
    prefix.pop_back();
  }
}

TEST(TokenSlicer, OptimalOnSmallInstancesAgainstBruteForce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> coefficient(0.0, 1.0);
  for (int trial = 0; trial < 60; ++trial) {
    const double base = 0.5 + 4 * coefficient(rng), per_token = coefficient(rng),
                 per_context = 0.3 * coefficient(rng), cross = 0.02 * coefficient(rng);
    const SliceCost cost = [=](int64_t l, int64_t c) {
      return base + per_token * double(l) + per_context * double(c) + cross * double(l * c);
    };
    const int64_t length = 8 * (1 + trial % 10);
    const int stages = 1 + trial % 6;
    std::vector<std::vector<int64_t>> candidates;
    std::vector<int64_t> prefix;
    all_slicings(length, 8, prefix, candidates);
    double brute = 1e300;
    for (const auto& slices : candidates) brute = std::min(brute, slicing_objective(slices, cost, stages));
    const Slicing dp = optimal_token_slicing(length, stages, cost, 8);
    EXPECT_NEAR(dp.total_s, brute, 1e-9 * brute) << "trial " << trial;
    int64_t covered = 0;
    for (int64_t s : dp.slices) covered += s;
    EXPECT_EQ(covered, length);
  }
}

TEST(TokenSlicer, SlicesShrinkAsContextGrows) {
  // Attention cost grows with the context: later slices must be shorter.
  const SliceCost cost = [](int64_t l, int64_t c) {
    return 1.0 + 0.05 * double(l) + 0.0004 * double(l) * double(c);
  };
  const Slicing slicing = optimal_token_slicing(512, 8, cost, 8);
  ASSERT_GE(slicing.slices.size(), 3u);
  EXPECT_GT(slicing.slices.front(), slicing.slices.back());
  for (size_t i = 1; i < slicing.slices.size(); ++i) {
    EXPECT_LE(slicing.slices[i], slicing.slices[i - 1]) << "slice " << i;
  }
  const Slicing whole = uniform_token_slicing(512, 1, 8, cost);
  const Slicing uniform = uniform_token_slicing(512, static_cast<int64_t>(slicing.slices.size()), 8, cost);
  EXPECT_LT(slicing.total_s, uniform.total_s);
  EXPECT_LT(slicing.total_s, whole.total_s);
}

TEST(TokenSlicer, OneStageNeedsNoSlicingWhenSlicesHaveOverhead) {
  const SliceCost cost = [](int64_t l, int64_t) { return 1.0 + double(l); };
  const Slicing slicing = optimal_token_slicing(64, 1, cost, 8);
  EXPECT_EQ(slicing.slices, (std::vector<int64_t>{64}));
  EXPECT_DOUBLE_EQ(slicing.total_s, 65);
}

TEST(BatchSplit, MatchesBruteForce) {
  // f(b): a fixed overhead plus a concave-then-convex shape, so mixed sizes can win.
  const auto f = [](int64_t b) { return 3.0 + 2.0 * double(b) + 0.3 * double(b * b) - 0.02 * double(b * b * b) + (b > 5 ? 4.0 : 0.0); };
  for (int64_t batch = 1; batch <= 12; ++batch) {
    std::vector<std::vector<int64_t>> splits;
    std::vector<int64_t> prefix;
    all_slicings(batch, 1, prefix, splits);
    double brute = 1e300;
    for (const auto& split : splits) {
      double total = 0;
      for (int64_t b : split) total += f(b);
      brute = std::min(brute, total);
    }
    const BatchSplit dp = optimal_batch_split(batch, f);
    EXPECT_NEAR(dp.total_s, brute, 1e-9);
    int64_t covered = 0;
    for (int64_t b : dp.microbatch_sizes) covered += b;
    EXPECT_EQ(covered, batch);
  }
}

}  // namespace
}  // namespace pipetrain::plan

namespace pipetrain::plan {
namespace {

TEST(TokenSlicer, WeightedObjectiveMatchesBruteForce) {
  const SliceCost cost = [](int64_t l, int64_t c) { return 0.7 + 0.1 * double(l) + 0.003 * double(l * c); };
  for (double weight : {0.0, 0.37, 2.5, 11.0}) {
    std::vector<std::vector<int64_t>> candidates;
    std::vector<int64_t> prefix;
    all_slicings(64, 8, prefix, candidates);
    double brute = 1e300;
    for (const auto& slices : candidates) {
      double sum = 0, slowest = 0;
      int64_t context = 0;
      for (int64_t l : slices) sum += cost(l, context), slowest = std::max(slowest, cost(l, context)), context += l;
      brute = std::min(brute, sum + weight * slowest);
    }
    EXPECT_NEAR(optimal_token_slicing_weighted(64, weight, cost, 8).total_s, brute, 1e-9) << weight;
  }
}

}  // namespace
}  // namespace pipetrain::plan
