#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/terapipe.h"

namespace pipetrain::plan {
namespace {

TeraPipeSetup gpt3_175b() {
  TeraPipeSetup setup;
  setup.model = find_gpt_shape("gpt3-175b");
  setup.cluster = load_cluster("p3-16xlarge-x48", std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
  setup.stages = 48;
  setup.tensor_parallel = 8;
  setup.batch = 2;
  return setup;
}

TEST(TeraPipe, SliceLatencyGrowsWithContextAndLength) {
  const TeraPipeSetup setup = gpt3_175b();
  EXPECT_LT(slice_latency_s(setup, 1, 128, 0), slice_latency_s(setup, 1, 128, 1024));
  EXPECT_LT(slice_latency_s(setup, 1, 128, 0), slice_latency_s(setup, 1, 256, 0));
  // short slices underuse the device: twice the tokens cost less than twice the time
  EXPECT_LT(slice_latency_s(setup, 1, 64, 0), 2 * slice_latency_s(setup, 1, 32, 0));
  EXPECT_GT(slice_latency_s(setup, 1, 64, 0), slice_latency_s(setup, 1, 32, 0));
}

TEST(TeraPipe, SlicingBeatsMicrobatchOnlyPipeliningAtBatchTwo) {
  const TeraPipeComparison r = compare_terapipe(gpt3_175b());
  EXPECT_LE(r.dp_s, r.uniform_s * (1 + 1e-12));
  EXPECT_GT(r.microbatch_only_s / r.dp_s, 2.0);  // batch 2 on 48 stages idles ~96% unsliced
  int64_t covered = 0;
  for (int64_t l : r.dp.slices) covered += l;
  EXPECT_EQ(covered, 2048);
}

// The joint batch + token DP includes the equal-microbatch plan, so it is never slower; with
// batch 2 on 48 stages it keeps single-sequence microbatches.
TEST(TeraPipe, BatchDpIsNeverSlowerThanEqualMicrobatches) {
  TeraPipeSetup setup = gpt3_175b();
  for (int64_t batch : {2, 8}) {
    setup.batch = batch;
    const TeraPipeComparison r = compare_terapipe(setup);
    EXPECT_LE(r.joint.total_s, r.dp_s * (1 + 1e-12)) << batch;
    int64_t sequences = 0;
    for (int64_t b : r.joint.microbatch_sizes) sequences += b;
    EXPECT_EQ(sequences, batch);
  }
  setup.batch = 2;
  EXPECT_EQ(compare_terapipe(setup).joint.microbatch_sizes, (std::vector<int64_t>{1, 1}));
}

TEST(TeraPipe, BadSetupsAreUserErrors) {
  TeraPipeSetup setup = gpt3_175b();
  setup.microbatch = 3;
  EXPECT_THROW(compare_terapipe(setup), UserError);
  setup = gpt3_175b();
  setup.stages = 500;
  EXPECT_THROW(compare_terapipe(setup), UserError);
}

}  // namespace
}  // namespace pipetrain::plan

namespace pipetrain::plan {
namespace {

TEST(TeraPipe, SimulatedSlicedScheduleTakesTheDpObjective) {
  for (int64_t batch : {1, 2, 4}) {
    TeraPipeSetup setup = gpt3_175b();
    setup.model = find_gpt_shape("gpt3-13b");
    setup.stages = 8;
    setup.batch = batch;
    const TeraPipeComparison r = compare_terapipe(setup);
    const SlicedSimulation simulated = simulate_sliced(setup, r.dp);
    EXPECT_EQ(simulated.schedule.slices, static_cast<int>(r.dp.slices.size()));
    EXPECT_NEAR(simulated.result.iteration_ms / 1e3, r.dp_s, 1e-9 * r.dp_s) << "batch " << batch;
  }
}

}  // namespace
}  // namespace pipetrain::plan
