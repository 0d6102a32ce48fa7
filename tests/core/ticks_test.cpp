#include <gtest/gtest.h>

#include "core/ticks.h"

namespace pipetrain {
namespace {

TEST(Ticks, StepIsOneTwoOrFiveTimesAPowerOfTen) {
  EXPECT_DOUBLE_EQ(nice_tick_step(800, 6), 200);   // 133.3 -> 200
  EXPECT_DOUBLE_EQ(nice_tick_step(100, 10), 10);   // exactly 10
  EXPECT_DOUBLE_EQ(nice_tick_step(3.7, 5), 1);     // 0.74 -> 1
  EXPECT_DOUBLE_EQ(nice_tick_step(0.3, 5), 0.1);   // 0.06 -> 0.1
  EXPECT_DOUBLE_EQ(nice_tick_step(45, 10), 5);     // 4.5 -> 5
}

TEST(Ticks, CoverTheRangeFromRoundNumbers) {
  // The loss plot of an 800-step run logged every 10 steps: x from 1 to 800.
  const std::vector<double> steps = nice_ticks(1, 800, 6);
  EXPECT_EQ(steps, (std::vector<double>{0, 200, 400, 600, 800}));
  const std::vector<double> losses = nice_ticks(1.43, 5.61, 5);
  EXPECT_EQ(losses, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  const std::vector<double> small = nice_ticks(-0.25, 0.3, 5);  // step 0.2
  ASSERT_EQ(small.size(), 5u);
  EXPECT_DOUBLE_EQ(small.front(), -0.4);
  EXPECT_EQ(small[2], 0.0);  // exactly zero, not 5.6e-17
  EXPECT_DOUBLE_EQ(small.back(), 0.4);
}

}  // namespace
}  // namespace pipetrain
