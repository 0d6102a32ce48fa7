// Float16's dynamic loss scale against its closed form: halved (and the step skipped) on a
// non-finite norm, doubled after growth_interval finite steps in a row, a power of two always;
// the scale one decision back kept for a no-flush schedule's lagging last stage; every other precision
// scales by 1 and skips nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "train/loss_scale.h"

namespace pipetrain {
namespace {

LossScale float16_scale(double initial, int64_t interval) {
  TrainConfig train;
  train.loss_scale = initial;
  train.loss_scale_growth_interval = interval;
  return LossScale(device::precision_of(device::PrecisionKind::Float16Mixed), train);
}

TEST(LossScale, HalvesOnOverflowAndDoublesAfterTheGrowthInterval) {
  LossScale scale = float16_scale(65536, 3);
  ASSERT_TRUE(scale.active());
  EXPECT_EQ(scale.factor(), 65536);
  EXPECT_FALSE(scale.record(std::numeric_limits<double>::infinity()));  // skipped
  EXPECT_EQ(scale.factor(), 32768);
  EXPECT_FALSE(scale.record(std::nan("")));
  EXPECT_EQ(scale.factor(), 16384);
  EXPECT_TRUE(scale.record(1.5));
  EXPECT_TRUE(scale.record(2.5));
  EXPECT_EQ(scale.factor(), 16384);  // 2 of 3 good steps
  EXPECT_TRUE(scale.record(0.0));
  EXPECT_EQ(scale.factor(), 32768);  // the third doubles it, and the count starts again
  EXPECT_EQ(scale.state().good_steps, 0);
  EXPECT_TRUE(scale.record(1.0));
  EXPECT_EQ(scale.state().good_steps, 1);
  EXPECT_FALSE(scale.record(std::numeric_limits<double>::infinity()));  // and an overflow resets it
  EXPECT_EQ(scale.state().good_steps, 0);
  EXPECT_EQ(scale.factor(), 16384);
  EXPECT_EQ(scale.state().applied_steps, 4);  // checkpoints tell "the optimizer has state" by it
}

TEST(LossScale, IsAPowerOfTwoAndAtLeastOne) {
  EXPECT_EQ(float16_scale(1000, 10).factor(), 1024);  // exact scaling and unscaling
  LossScale scale = float16_scale(2, 10);
  scale.record(std::numeric_limits<double>::infinity());
  scale.record(std::numeric_limits<double>::infinity());
  EXPECT_EQ(scale.factor(), 1);
}

TEST(LossScale, RestoresAState) {
  LossScale scale = float16_scale(65536, 2);
  scale.restore({512, 1, 0, 256}, 7);
  EXPECT_EQ(scale.scale_at(7), 512);
  EXPECT_EQ(scale.scale_at(6), 256);
  EXPECT_TRUE(scale.record(1.0));
  EXPECT_EQ(scale.factor(), 1024);
}

// 2BW's last stage reads one version behind: update u's loss ran at the scale of version u - 1,
// the scale one decision before the current one, which is kept until the next decision.
TEST(LossScale, KeepsTheScaleOneVersionBack) {
  LossScale scale = float16_scale(1024, 100);
  EXPECT_EQ(scale.scale_at(0), 1024);
  EXPECT_TRUE(scale.record(1.0));                                        // update 0
  EXPECT_FALSE(scale.record(std::numeric_limits<double>::infinity()));  // update 1
  EXPECT_EQ(scale.scale_at(2), 512);
  EXPECT_EQ(scale.scale_at(1), 1024);  // what update 2's forwards read
  EXPECT_FALSE(scale.record(std::numeric_limits<double>::infinity()));  // update 2, at 1024 again
  EXPECT_EQ(scale.scale_at(3), 256);
  EXPECT_EQ(scale.scale_at(2), 512);
  EXPECT_THROW(scale.scale_at(1), std::logic_error);  // two decisions back: not kept
  EXPECT_THROW(scale.scale_at(4), std::logic_error);
}

TEST(LossScale, OtherPrecisionsScaleByOneAndSkipNothing) {
  for (const auto kind : {device::PrecisionKind::Float32, device::PrecisionKind::Float64,
                          device::PrecisionKind::BFloat16Mixed}) {
    LossScale scale(device::precision_of(kind), TrainConfig{});
    EXPECT_FALSE(scale.active());
    EXPECT_EQ(scale.factor(), 1);
    EXPECT_TRUE(scale.record(std::numeric_limits<double>::infinity()));
    EXPECT_EQ(scale.factor(), 1);
  }
}

}  // namespace
}  // namespace pipetrain
