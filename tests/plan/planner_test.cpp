#include <gtest/gtest.h>

#include "core/error.h"
#include "plan/plan_file.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "schedule/generators.h"
#include "sim/simulator.h"
#include "uniform_profile.h"

namespace pipetrain::plan {
namespace {

ClusterSpec p3_cluster() {
  return load_cluster("p3-16xlarge-x8", std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
}

TEST(Analytic, ParameterCountsAndFlopsFollowTheShapes) {
  const GptShape shape = find_gpt_shape("gpt-3.9b");
  EXPECT_NEAR(shape.parameters() / 1e9, 3.78, 0.01);  // 32 x 12h^2 + vocab x h, h = 3072
  EXPECT_NEAR(find_gpt_shape("gpt3-175b").parameters() / 1e9, 174.6, 0.5);
  const GptShape tiny{"tiny", 2, 4, 2, 8, 16};
  EXPECT_DOUBLE_EQ(block_forward_flops(tiny, 3), 24.0 * 3 * 8 * 16 + 4.0 * 3 * 64 * 4);
  EXPECT_DOUBLE_EQ(head_forward_flops(tiny, 3), 2.0 * 3 * 8 * 4 * 16);
  EXPECT_THROW(find_gpt_shape("gpt-9"), UserError);
}

TEST(Analytic, LayerListAndRecomputation) {
  const GptShape shape = find_gpt_shape("gpt-2.2b");
  const auto plain = analytic_gpt_layers(shape, p3_cluster(), {8, false});
  const auto recompute = analytic_gpt_layers(shape, p3_cluster(), {8, true});
  ASSERT_EQ(plain.size(), 34u);  // embedding, 32 blocks, head
  EXPECT_DOUBLE_EQ(recompute[5].backward_s, 1.5 * plain[5].backward_s);  // one more forward
  EXPECT_LT(recompute[5].activation_bytes, plain[5].activation_bytes / 10);
  EXPECT_DOUBLE_EQ(plain[5].output_bytes, 2.0 * 8 * 512 * 2304);  // fp16 activations
}

TEST(Planner, RanksFeasiblePlansAndExplainsTheRest) {
  PlanRequest request;
  request.model = find_gpt_shape("gpt-3.9b");
  request.cluster = p3_cluster();
  request.global_batch = 256;
  const PlanResult result = plan_training(request);
  ASSERT_FALSE(result.ranked.empty());
  for (size_t i = 1; i < result.ranked.size(); ++i) {
    EXPECT_GE(result.ranked[i - 1].samples_per_s, result.ranked[i].samples_per_s);
  }
  for (const auto& c : result.ranked) {
    EXPECT_LE(c.peak_memory_bytes, request.cluster.device_memory_bytes);
    EXPECT_EQ(c.stages * c.dp_width, 64);
    EXPECT_EQ(c.microbatch * c.microbatches * c.dp_width, 256);
    if (c.schedule == "2bw") {
      EXPECT_GE(c.microbatches, c.stages);
    }
    EXPECT_FALSE(c.lost_because.empty());
  }
  // 3.9B parameters with Adam (16 bytes each) cannot be replicated on 16 GB devices.
  bool data_parallel_rejected = false;
  for (const auto& c : result.infeasible) {
    if (c.stages == 1) {
      data_parallel_rejected = true;
      EXPECT_NE(c.rejected.find("memory"), std::string::npos) << c.rejected;
    }
  }
  EXPECT_TRUE(data_parallel_rejected);
  // No flush beats a flush at the same configuration.
  const auto two_bw = evaluate_candidate(request, "2bw", 8, 1, false);
  const auto flush = evaluate_candidate(request, "1f1b", 8, 1, false);
  ASSERT_TRUE(two_bw.fits && flush.fits);
  EXPECT_GT(two_bw.samples_per_s, flush.samples_per_s);
}

// Interleaved plans are timed on the d x 2 model stages the runtime runs, and the plan file
// hands those counts to the runtime.
TEST(Planner, InterleavedPlansCarryTheirChunkPartition) {
  PlanRequest request;
  request.model = find_gpt_shape("gpt-3.9b");
  request.cluster = p3_cluster();
  request.global_batch = 256;
  const auto c = evaluate_candidate(request, "interleaved", 8, 1, false);
  ASSERT_TRUE(c.fits) << c.rejected;
  ASSERT_EQ(c.chunk_partition.size(), 16u);
  int layers = 0;
  for (int n : c.chunk_partition) {
    EXPECT_GE(n, 1);
    layers += n;
  }
  EXPECT_EQ(layers, request.model.layers + 2);  // embedding + blocks + head
  const auto json = plan_to_json(request, c);
  std::string partition, chunks;
  for (const auto& [key, value] : plan_config_overrides(json, "plan.json")) {
    if (key == "pipeline.partition") partition = value;
    if (key == "pipeline.chunks") chunks = value;
  }
  EXPECT_EQ(chunks, "2");
  std::string expected;
  for (int n : c.chunk_partition) expected += (expected.empty() ? "" : ",") + std::to_string(n);
  EXPECT_EQ(partition, expected);
}

// The uniform profile planned for this machine's runtime.
PlanRequest uniform_runtime_request() {
  PlanRequest request = uniform_profile_request();
  request.microbatch_sizes = {4};
  request.recompute = {false};
  request.for_pipetrain_runtime = true;
  request.cluster = load_cluster("this-machine", std::string(PIPETRAIN_SOURCE_DIR) + "/clusters");
  request.global_batch = 8;  // d = 2: m = 2 microbatches of 4
  return request;
}

// Interleaved on the runtime: a worker's update runs at its last chunk's, and the simulation
// must reach it. (Meeting at the first chunk's update deadlocked, and the partial timeline
// was taken for the step: 20.4 ms here instead of the whole step.)
TEST(Planner, RuntimeInterleavedPlanIsTimedToTheEndOfTheStep) {
  const PlanRequest request = uniform_runtime_request();
  const auto c = evaluate_candidate(request, "interleaved", 2, 4, false);
  ASSERT_TRUE(c.fits) << c.rejected;
  ASSERT_TRUE(c.costs.synchronous_updates);
  // A flushed schedule with free updates: meeting at the update changes nothing.
  sim::CostModel local = c.costs;
  local.synchronous_updates = false;
  const double local_ms = sim::simulate(schedule::make_schedule(c.schedule_spec), local).iteration_ms;
  EXPECT_NEAR(1e3 * c.iteration_s, local_ms, 1e-9);
  EXPECT_GT(1e3 * c.iteration_s, 2 * 3 * 3.0);  // above one worker's compute: 2 x 3 layers x 3 ms
  // Not slower than the plain 2-stage flush: with F + B = 9 ms a stage, its critical path is
  // worker 0's F1 (2F), the send, worker 1's F1 and B1 (behind its B0), the send back and
  // worker 0's B1: 3 (F + B) + 2 transfers of 1 KB.
  const auto flush = evaluate_candidate(request, "1f1b", 2, 4, false);
  const double transfer_ms = c.costs.p2p_latency_ms + 1e3 / c.costs.bandwidth_bytes_per_ms;
  EXPECT_NEAR(1e3 * flush.iteration_s, 27.0 + 2 * transfer_ms, 1e-9);
  EXPECT_LE(c.iteration_s, flush.iteration_s);
}

TEST(Cluster, DescriptionsParseAndErrorsAreClear) {
  const ClusterSpec c = p3_cluster();
  EXPECT_EQ(c.devices(), 64);
  EXPECT_DOUBLE_EQ(c.inter_node_bandwidth, 25e9 / 8);
  EXPECT_THROW(parse_cluster_toml("nodes = \"many\"\n", "t"), UserError);
  EXPECT_THROW(parse_cluster_toml("gpus = 3\n", "t"), UserError);
  EXPECT_THROW(parse_cluster_toml("nodes = 0\n", "t"), UserError);
  EXPECT_THROW(parse_cluster_toml("", "t"), UserError);  // no hardware: not all defaults
  EXPECT_THROW(parse_cluster_toml("name = \"x\"\ndescription = \"y\"\n", "t"), UserError);
  EXPECT_THROW(load_cluster("no-such-cluster", "/nonexistent"), UserError);
  // Device memory in gigabytes per second (an H200's HBM), 0 when not given.
  EXPECT_DOUBLE_EQ(parse_cluster_toml("memory_bandwidth_gb_s = 4800\n", "t").memory_bandwidth, 4.8e12);
  EXPECT_DOUBLE_EQ(c.memory_bandwidth, 900e9);  // clusters/p3-16xlarge-x8.toml's V100s
  EXPECT_DOUBLE_EQ(parse_cluster_toml("nodes = 1\n", "t").memory_bandwidth, 0);
  EXPECT_THROW(parse_cluster_toml("memory_bandwidth_gb_s = -1\n", "t"), UserError);
  // An operator's fixed costs in microseconds, none when not given.
  const ClusterSpec timed = parse_cluster_toml("operator_us = 2.5\nlaunch_us = 9\n", "t");
  EXPECT_DOUBLE_EQ(timed.operator_s, 2.5e-6);
  EXPECT_DOUBLE_EQ(timed.launch_s, 9e-6);
  EXPECT_DOUBLE_EQ(c.operator_s + c.launch_s, 0);
  EXPECT_THROW(parse_cluster_toml("launch_us = -1\n", "t"), UserError);
  // GPUs, unless it says CPU cores or shares a node's cores among workers.
  EXPECT_TRUE(c.gpus);
  EXPECT_FALSE(parse_cluster_toml("device = \"cpu\"\n", "t").gpus);
  EXPECT_FALSE(parse_cluster_toml("cores_per_node = 2\n", "t").gpus);
  EXPECT_TRUE(parse_cluster_toml("cores_per_node = 2\ndevice = \"gpu\"\n", "t").gpus);
  EXPECT_THROW(parse_cluster_toml("device = \"tpu\"\n", "t"), UserError);
}

}  // namespace
}  // namespace pipetrain::plan
