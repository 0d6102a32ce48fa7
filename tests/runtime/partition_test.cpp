#include <gtest/gtest.h>

#include "core/error.h"
#include "model/registry.h"
#include "runtime/partition.h"

namespace pipetrain::runtime {
namespace {

Config config_with(int64_t layers, int64_t stages, const std::string& partition) {
  Config c;
  c.model.layers = layers;
  c.pipeline.stages = stages;
  c.pipeline.partition = partition;
  return c;
}

TEST(Partition, BalancedFollowsComputeNotParameters) {
  // d = 128, V = 256, seq 128: a block is 4.4x the head's compute but the head has the largest
  // parameter share after the embedding; the near-free embedding joins whichever side.
  const auto costs = layer_costs(*make_model(Config{}), 4);
  ASSERT_EQ(costs.size(), 6u);
  EXPECT_GT(costs[1].forward_s, 4 * costs[5].forward_s);
  EXPECT_LT(costs[0].forward_s, 0.01 * costs[1].forward_s);
  const auto two = stage_ranges(config_with(4, 2, "balanced"));
  EXPECT_EQ(two[0].last, 3);  // [embedding, block 0, block 1 | block 2, block 3, head]
  const auto four = stage_ranges(config_with(6, 4, "balanced"));
  // 6 blocks over 4 stages: the stage with the head gets one block, never two.
  EXPECT_EQ(four.back().last - four.back().first, 2);
}

TEST(Partition, ExplicitCountsBecomeContiguousRanges) {
  const auto ranges = stage_ranges(config_with(4, 2, "2,4"));
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].last, 2);
  EXPECT_EQ(ranges[1].first, 2);
  EXPECT_EQ(ranges[1].last, 6);
}

TEST(Partition, BalancedCoversEveryLayerOnce) {
  const auto ranges = stage_ranges(config_with(6, 4, "balanced"));
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges.front().first, 0);
  EXPECT_EQ(ranges.back().last, 8);
  for (size_t s = 1; s < ranges.size(); ++s) EXPECT_EQ(ranges[s].first, ranges[s - 1].last);
}

TEST(Partition, BadPartitionsAreUserErrors) {
  EXPECT_THROW(stage_ranges(config_with(4, 2, "3,4")), UserError);  // sums to 7, not 6
  EXPECT_THROW(stage_ranges(config_with(4, 2, "6")), UserError);    // one count for 2 stages
  EXPECT_THROW(stage_ranges(config_with(4, 2, "a,b")), UserError);
  EXPECT_THROW(stage_ranges(config_with(4, 2, "0,6")), UserError);
  EXPECT_THROW(stage_ranges(config_with(1, 4, "balanced")), UserError);  // 3 layers, 4 stages
}

TEST(Partition, RecomputationNamesStages) {
  EXPECT_FALSE(recomputes_stage("none", 0, 2));
  EXPECT_TRUE(recomputes_stage("all", 1, 2));
  EXPECT_TRUE(recomputes_stage("0,2", 2, 4));
  EXPECT_FALSE(recomputes_stage("0,2", 1, 4));
  EXPECT_THROW(recomputes_stage("4", 0, 4), UserError);  // stages are 0..3
  EXPECT_THROW(recomputes_stage("yes", 0, 4), UserError);
  EXPECT_THROW(recomputes_stage("1,", 0, 4), UserError);
}

}  // namespace
}  // namespace pipetrain::runtime
