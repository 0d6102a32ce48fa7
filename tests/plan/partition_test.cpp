#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "plan/partition.h"

namespace pipetrain::plan {
namespace {

// Every way to cut n layers into k non-empty contiguous stages.
void compositions(int n, int k, std::vector<int>& prefix, std::vector<std::vector<int>>& out) {
  if (k == 1) {
    prefix.push_back(n);
    out.push_back(prefix);
    prefix.pop_back();
    return;
  }
  for (int first = 1; first <= n - (k - 1); ++first) {
    prefix.push_back(first);
    compositions(n - first, k - 1, prefix, out);
    prefix.pop_back();
  }
}

std::vector<LayerCost> random_layers(std::mt19937& rng, int n) {
  std::uniform_real_distribution<double> time(0.1, 5.0), bytes(1, 100);
  std::vector<LayerCost> layers(n);
  for (auto& layer : layers) {
    layer.forward_s = time(rng);
    layer.backward_s = 2 * time(rng);
    layer.param_bytes = bytes(rng);
    layer.optimizer_bytes = 2 * layer.param_bytes;
    layer.activation_bytes = bytes(rng);
    layer.output_bytes = bytes(rng);
  }
  return layers;
}

// The partitioner's answer against the brute-force optimum (infinity: nothing fits, counted in
// `infeasible`); true when there is a partition to check further.
bool expect_brute_force_optimum(const std::optional<Partition>& dp, double brute, int trial,
                                int& infeasible) {
  if (brute == std::numeric_limits<double>::infinity()) {
    EXPECT_FALSE(dp.has_value()) << "trial " << trial;
    ++infeasible;
    return false;
  }
  EXPECT_TRUE(dp.has_value()) << "trial " << trial;
  if (!dp) return false;
  EXPECT_NEAR(dp->bottleneck_s, brute, 1e-12) << "trial " << trial;
  return true;
}

TEST(BalancedPartition, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(7);
  int infeasible = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + trial % 9, stages = 1 + trial % std::min(n, 5);
    const auto layers = random_layers(rng, n);
    StageLimits limits;
    limits.link_bandwidth = 50;
    limits.link_latency_s = 0.05;
    limits.microbatches = 1 + trial % 6;
    limits.weight_versions = 1 + trial % 2;
    limits.gpipe_memory = trial % 3 == 0;
    limits.memory_bytes = trial % 4 == 0 ? 1e300 : 300 + 50 * (trial % 7);
    std::vector<std::vector<int>> all;
    std::vector<int> prefix;
    compositions(n, stages, prefix, all);
    double brute = std::numeric_limits<double>::infinity();
    for (const auto& counts : all) {
      const Partition p = evaluate_partition(layers, counts, limits);
      const bool fits = std::all_of(p.stage_memory_bytes.begin(), p.stage_memory_bytes.end(),
                                    [&](double m) { return m <= limits.memory_bytes; });
      if (fits) brute = std::min(brute, p.bottleneck_s);
    }
    const auto dp = balanced_partition(layers, stages, limits);
    if (!expect_brute_force_optimum(dp, brute, trial, infeasible)) continue;
    for (double memory : dp->stage_memory_bytes) EXPECT_LE(memory, limits.memory_bytes);
  }
  EXPECT_GT(infeasible, 0);  // the memory limit really bites in some trials
}

// The V placement's cut (worker w: stages w and 2p-1-w) against every cut into 2p stages: the
// slowest worker's two stages together, each worker's two stages within memory together.
TEST(VBalancedPartition, MatchesBruteForceOnRandomInstances) {
  std::mt19937 rng(11);
  int infeasible = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const int workers = 1 + trial % 3, n = 2 * workers + trial % 6;
    const auto layers = random_layers(rng, n);
    StageLimits limits;
    limits.link_bandwidth = 50;
    limits.link_latency_s = 0.05;
    limits.microbatches = 1 + trial % 4;
    limits.memory_bytes = trial % 3 == 0 ? 1e300 : 500 + 100 * (trial % 5);
    std::vector<std::vector<int>> all;
    std::vector<int> prefix;
    compositions(n, 2 * workers, prefix, all);
    double brute = std::numeric_limits<double>::infinity();
    for (const auto& counts : all) {
      const Partition p = evaluate_partition(layers, counts, limits);
      bool fits = true;
      for (int w = 0; w < workers; ++w) {
        fits &= p.stage_memory_bytes[size_t(w)] + p.stage_memory_bytes[size_t(2 * workers - 1 - w)] <=
                limits.memory_bytes;
      }
      if (fits) brute = std::min(brute, v_worker_bottleneck(p.stage_time_s));
    }
    const auto dp = v_balanced_partition(layers, workers, limits);
    if (!expect_brute_force_optimum(dp, brute, trial, infeasible)) continue;
    EXPECT_DOUBLE_EQ(dp->bottleneck_s, v_worker_bottleneck(dp->stage_time_s));
  }
  EXPECT_GT(infeasible, 0);  // the memory limit really bites in some trials
}

// Light ends (an embedding and a head cheaper than a block) sit on the same worker in a V: the
// stage-balanced cut gives worker 0 two light stages, the V cut gives it more blocks.
TEST(VBalancedPartition, WorkerHoldingBothEndsGetsMoreBlocks) {
  std::vector<LayerCost> layers(8);  // embedding, 6 blocks, head
  for (auto& layer : layers) layer.forward_s = 1, layer.backward_s = 2;
  layers.front().forward_s = layers.back().forward_s = 0.1;
  layers.front().backward_s = layers.back().backward_s = 0.2;
  const auto v = v_balanced_partition(layers, 2, StageLimits{});
  ASSERT_TRUE(v.has_value());
  // Worker 0: the embedding, the head and 3 blocks; worker 1: 3 blocks.
  EXPECT_EQ(v->layer_counts[0] + v->layer_counts[3], 5);
  EXPECT_DOUBLE_EQ(v->bottleneck_s, 9.0 + 0.6);
  const auto even = balanced_partition(layers, 4, StageLimits{});
  EXPECT_GT(v_worker_bottleneck(even->stage_time_s), v->bottleneck_s);
  EXPECT_THROW(v_balanced_partition(layers, 5, StageLimits{}), UserError);  // 10 stages, 8 layers
}

TEST(BalancedPartition, TiedHeadGetsFewerBlocksThanEqualCounts) {
  // A GPT-like list: cheap embedding, 8 equal blocks, a head whose vocab matmul costs 3 blocks.
  std::vector<LayerCost> layers(10);
  layers[0].forward_s = 0.1, layers[0].backward_s = 0.1;
  for (int i = 1; i <= 8; ++i) layers[i].forward_s = 1, layers[i].backward_s = 2;
  layers[9].forward_s = 3, layers[9].backward_s = 6;
  const StageLimits limits;
  const auto balanced = balanced_partition(layers, 4, limits);
  ASSERT_TRUE(balanced.has_value());
  const Partition equal = evaluate_partition(layers, equal_layer_counts(10, 4), limits);
  EXPECT_EQ(equal.layer_counts, (std::vector<int>{2, 2, 3, 3}));
  EXPECT_DOUBLE_EQ(equal.bottleneck_s, 15);  // two blocks + the head
  EXPECT_DOUBLE_EQ(balanced->bottleneck_s, 9);  // three blocks, or the head alone
  EXPECT_EQ(balanced->layer_counts, (std::vector<int>{3, 3, 3, 1}));
}

// Four blocks (1 + 2 units) and a head with chunked cross-entropy: forward 2, whole backward 6
// (2 products + the logits recomputed once), B and W 5 each (each recomputes them). Whole, the
// cut 3 | 1 + head costs 9 | 11; split, the head's stage runs forward + B + W: 9 | 15, so
// 4 | head (12 | 12) wins. The first stage runs whole backwards either way.
TEST(BalancedPartition, ASplitBackwardsStageCostsForwardPlusBPlusW) {
  std::vector<LayerCost> layers(5);
  for (int i = 0; i < 4; ++i) layers[i].forward_s = 1, layers[i].backward_s = 2;
  layers[4].forward_s = 2, layers[4].backward_s = 6, layers[4].input_s = 5, layers[4].weight_s = 5;
  EXPECT_DOUBLE_EQ(stage_backward_s(layers[4], false), 6);
  EXPECT_DOUBLE_EQ(stage_backward_s(layers[4], true), 10);
  EXPECT_DOUBLE_EQ(stage_backward_s(layers[0], true), 2);  // B + W = the backward, halves unknown
  StageLimits limits;
  EXPECT_EQ(balanced_partition(layers, 2, limits)->layer_counts, (std::vector<int>{3, 2}));
  EXPECT_DOUBLE_EQ(balanced_partition(layers, 2, limits)->bottleneck_s, 11);
  limits.split_backward = true;
  EXPECT_EQ(balanced_partition(layers, 2, limits)->layer_counts, (std::vector<int>{4, 1}));
  EXPECT_DOUBLE_EQ(balanced_partition(layers, 2, limits)->bottleneck_s, 12);
  EXPECT_DOUBLE_EQ(balanced_partition(layers, 1, limits)->bottleneck_s, 20);  // one stage: whole
}

TEST(BalancedPartition, BadRequestsAreUserErrors) {
  const std::vector<LayerCost> layers(3);
  EXPECT_THROW(balanced_partition(layers, 4, {}), UserError);
  EXPECT_THROW(evaluate_partition(layers, {1, 1}, {}), UserError);
  EXPECT_THROW(evaluate_partition(layers, {3, 0}, {}), UserError);
}

}  // namespace
}  // namespace pipetrain::plan
