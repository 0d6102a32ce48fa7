#include <gtest/gtest.h>

#include "core/machine.h"

namespace pipetrain {
namespace {

using Blocks = std::vector<std::vector<int>>;

TEST(CoreBlocks, SplitTheCoresIntoContiguousBlocksOnePerWorker) {
  EXPECT_EQ(core_blocks({0, 1}, 2), (Blocks{{0}, {1}}));
  EXPECT_EQ(core_blocks({0, 1, 2, 3, 4, 5, 6, 7}, 2), (Blocks{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // The remainder goes to the first blocks, one core each: every core is used.
  EXPECT_EQ(core_blocks({0, 1, 2, 3, 4}, 2), (Blocks{{0, 1, 2}, {3, 4}}));
  EXPECT_EQ(core_blocks({0, 1, 2, 3, 4, 5, 6}, 3), (Blocks{{0, 1, 2}, {3, 4}, {5, 6}}));
  EXPECT_EQ(core_blocks({0, 1, 2}, 1), (Blocks{{0, 1, 2}}));
}

TEST(CoreBlocks, KeepToTheCoresTheProcessMayUse) {
  // `taskset -c 2,3,6,7 pipetrain train ...`: the blocks are made of those cores only.
  EXPECT_EQ(core_blocks({2, 3, 6, 7}, 2), (Blocks{{2, 3}, {6, 7}}));
  EXPECT_EQ(core_blocks({5}, 1), (Blocks{{5}}));
}

TEST(CoreBlocks, NoneWhenWorkersWouldShareACore) {
  EXPECT_TRUE(core_blocks({0, 1}, 3).empty());
  EXPECT_TRUE(core_blocks({4}, 2).empty());
  EXPECT_TRUE(core_blocks({0, 1}, 0).empty());
}

TEST(DescribeCores, WritesRunsOfConsecutiveCores) {
  EXPECT_EQ(describe_cores({0}), "0");
  EXPECT_EQ(describe_cores({0, 1, 2, 3}), "0-3");
  EXPECT_EQ(describe_cores({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(describe_cores({}), "");
}

TEST(AllowedCores, AreTheAffinityAndCountedByCpuCores) {
  const std::vector<int> cores = allowed_cores();
  ASSERT_FALSE(cores.empty());
  EXPECT_TRUE(std::is_sorted(cores.begin(), cores.end()));
  EXPECT_EQ(cpu_cores(), int(cores.size()));
}

// The one rule for a worker's compute threads (worker_run and the measured partition ask it).
TEST(WorkerComputeThreads, TrainThreadsElseTheBoundBlockElseAnEqualShare) {
  const int64_t cores = cpu_cores();
  EXPECT_EQ(worker_compute_threads(3, false, 8), 3);  // train.threads wins
  EXPECT_EQ(worker_compute_threads(3, true, 8), 3);
  EXPECT_EQ(worker_compute_threads(0, true, 8), cores);  // bound: its block is its affinity
  EXPECT_EQ(worker_compute_threads(0, false, 1), cores);
  EXPECT_EQ(worker_compute_threads(0, false, 2), std::max<int64_t>(1, cores / 2));
  EXPECT_EQ(worker_compute_threads(0, false, cores + 1), 1);  // more workers than cores: one each
}

}  // namespace
}  // namespace pipetrain
