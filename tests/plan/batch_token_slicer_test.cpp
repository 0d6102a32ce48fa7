#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "core/error.h"
#include "plan/batch_token_slicer.h"

namespace pipetrain::plan {
namespace {

std::vector<std::vector<int64_t>> slicings_of(int64_t length, int64_t unit) {
  if (length == 0) return {{}};
  std::vector<std::vector<int64_t>> out;
  for (int64_t first = unit; first <= length; first += unit)
    for (auto rest : slicings_of(length - first, unit)) {
      rest.insert(rest.begin(), first);
      out.push_back(rest);
    }
  return out;
}

// Partitions of `batch` into non-increasing parts.
std::vector<std::vector<int64_t>> splits_of(int64_t batch, int64_t largest) {
  if (batch == 0) return {{}};
  std::vector<std::vector<int64_t>> out;
  for (int64_t b = std::min(batch, largest); b >= 1; --b)
    for (auto rest : splits_of(batch - b, b)) {
      rest.insert(rest.begin(), b);
      out.push_back(rest);
    }
  return out;
}

// Brute force: every split of the batch, every slicing of every microbatch.
double brute_force(int64_t batch, int64_t length, int stages, const BatchSliceCost& cost) {
  const auto slicings = slicings_of(length, 8);
  double best = 1e300;
  for (const auto& split : splits_of(batch, batch)) {
    std::vector<size_t> pick(split.size(), 0);
    while (true) {
      double sum = 0, slowest = 0;
      for (size_t k = 0; k < split.size(); ++k) {
        int64_t context = 0;
        for (int64_t l : slicings[pick[k]]) {
          const double t = cost(split[k], l, context);
          sum += t, slowest = std::max(slowest, t), context += l;
        }
      }
      best = std::min(best, sum + (stages - 1) * slowest);
      size_t k = 0;
      while (k < pick.size() && ++pick[k] == slicings.size()) pick[k++] = 0;
      if (k == pick.size()) break;
    }
  }
  return best;
}

TEST(BatchAndTokenSlicing, OptimalOnSmallInstancesAgainstBruteForce) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    // A per-slice overhead (kernel launch, under-used device) that larger microbatches amortise.
    const double overhead = 0.5 + 3 * u(rng), per_token = u(rng), cross = 0.03 * u(rng),
                 saturation = 1 + 4 * u(rng);
    const BatchSliceCost cost = [=](int64_t b, int64_t l, int64_t c) {
      const double work = double(b) * (per_token * double(l) + cross * double(l * c));
      return overhead + work * (1 + saturation / double(b * l));
    };
    const int64_t batch = 1 + trial % 4, length = 8 * (1 + trial % 4);
    const int stages = 1 + trial % 5;
    const auto plan = optimal_batch_and_token_slicing(batch, length, stages, cost, 8);
    ASSERT_TRUE(plan.exhaustive);
    EXPECT_NEAR(plan.total_s, brute_force(batch, length, stages, cost), 1e-9) << "trial " << trial;
    int64_t sequences = 0;
    for (size_t k = 0; k < plan.slices.size(); ++k) {
      sequences += plan.microbatch_sizes[k];
      int64_t tokens = 0;
      for (int64_t l : plan.slices[k]) tokens += l;
      EXPECT_EQ(tokens, length);
    }
    EXPECT_EQ(sequences, batch);
    EXPECT_TRUE(std::is_sorted(plan.microbatch_sizes.rbegin(), plan.microbatch_sizes.rend()));
  }
}

// With no per-slice overhead and many stages, the pipeline fill dominates: the plan cuts the
// batch into single sequences and the sequence into short slices.
TEST(BatchAndTokenSlicing, ManyStagesPreferSmallPieces) {
  const BatchSliceCost cost = [](int64_t b, int64_t l, int64_t) { return double(b * l); };
  const auto plan = optimal_batch_and_token_slicing(4, 64, 16, cost, 8);
  EXPECT_EQ(plan.microbatch_sizes, (std::vector<int64_t>{1, 1, 1, 1}));
  for (const auto& slices : plan.slices) EXPECT_EQ(slices, std::vector<int64_t>(8, 8));
  EXPECT_DOUBLE_EQ(plan.total_s, 4 * 64 + 15 * 8);
}

TEST(BatchAndTokenSlicing, RefusesEmptyInput) {
  const BatchSliceCost cost = [](int64_t, int64_t l, int64_t) { return double(l); };
  EXPECT_THROW(optimal_batch_and_token_slicing(0, 64, 2, cost), UserError);
  EXPECT_THROW(optimal_batch_and_token_slicing(2, 64, 0, cost), UserError);
}

}  // namespace
}  // namespace pipetrain::plan
