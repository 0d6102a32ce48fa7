// The planner chooses among every synchronous catalogue schedule with each one's own memory:
// where the device memory allows ZB-H2's 2p-1 microbatches in flight or ZB-V's two chunks, a
// zero-bubble schedule wins; where it holds only 1F1B's p microbatches (and not the split
// backward's held weight-pass gradients), 1F1B does.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "plan/plan_report.h"
#include "plan/planner.h"
#include "schedule/catalogue.h"
#include "uniform_profile.h"

namespace pipetrain::plan {
namespace {

// One node of 4 devices (a cluster description, as clusters/*.toml hold them).
ClusterSpec four_devices(double memory_gb) {
  return parse_cluster_toml(fmt::format("name = \"four\"\nnodes = 1\ndevices_per_node = 4\n"
                                        "device_memory_gb = {}\ndevice_tflops = 100\n",
                                        memory_gb),
                            "four.toml");
}

// GPT 2.2B (PipeDream-2BW's), 32 sequences of 512 tokens a step in microbatches of 1, no recomputation, among the
// schedules with plain mini-batch semantics (the async ones change the update rule).
PlanRequest gpt_request(double memory_gb) {
  PlanRequest request;
  request.model = find_gpt_shape("gpt-2.2b");
  request.cluster = four_devices(memory_gb);
  request.global_batch = 32;
  request.microbatch_sizes = {1};
  request.recompute = {false};
  request.schedules = schedule::schedule_names_where([](const schedule::ScheduleEntry& e) {
    return e.planner.plans && e.flushes();
  });
  return request;
}

TEST(ScheduleChoice, EveryCatalogueScheduleCanBePlanned) {
  const PlanRequest request = gpt_request(1000);
  for (const auto& entry : schedule::schedule_catalogue()) {
    const PlanCandidate c = evaluate_candidate(request, entry.name, 4, 1, false);
    EXPECT_TRUE(c.fits) << entry.name << ": " << c.rejected;
    EXPECT_GT(c.samples_per_s, 0) << entry.name;
  }
  for (const char* name : {"zb-h1", "bfs", "zb-h2", "zb-v", "dualpipev"})
    EXPECT_TRUE(schedule::schedule_entry(name).planner.plans) << name;
}

TEST(ScheduleChoice, MemoryThatAllowsZeroBubblePicksItAndTightMemoryPicks1F1B) {
  const PlanResult roomy = plan_training(gpt_request(1000));
  ASSERT_FALSE(roomy.ranked.empty());
  const std::string pick = roomy.ranked.front().schedule;
  EXPECT_EQ(pick, "zb-h2") << format_plan_report(gpt_request(1000), roomy, 8);  // deterministic: analytic costs

  // Memory for 1F1B at d = 4 and not a byte more: ZB-H2 (2p-1 in flight), ZB-H1 (the held
  // weight-pass gradients), interleaved and breadth-first (more chunks in flight) and every
  // shallower pipeline (more weights per device) need more. (The V placements hold 1F1B's
  // activations, the paper's point, and with their cut balancing each device's two stages the
  // device holding the head holds fewer blocks: they fit, and lose on time.)
  const double one_f_one_b = evaluate_candidate(gpt_request(1000), "1f1b", 4, 1, false).peak_memory_bytes;
  const PlanRequest tight = gpt_request(one_f_one_b * 1.0001 / 1e9);
  for (const std::string& name : tight.schedules) {
    if (name == "1f1b" || name == "zb-v" || name == "dualpipev") continue;
    const PlanCandidate c = evaluate_candidate(gpt_request(1000), name, 4, 1, false);
    EXPECT_GT(c.peak_memory_bytes, tight.cluster.device_memory_bytes) << name;
  }
  const PlanResult result = plan_training(tight);
  ASSERT_FALSE(result.ranked.empty());
  EXPECT_EQ(result.ranked.front().schedule, "1f1b") << format_plan_report(tight, result, 8);
  EXPECT_EQ(result.ranked.front().stages, 4);
}

// Six equal layers (1 ms forward, 2 ms backward of which 1 ms weight gradient, 1 kB of
// activations each) on 2 devices: 3 layers a stage, A = 3 kB per microbatch in flight. The
// first worker holds p = 2 microbatches under 1F1B and ZB-H1 (no weight-pass bytes measured) and
// 2p - 1 = 3 under ZB-H2: (p - 1) A more; the split backward's measured B and W times are what
// ZB uses.
TEST(ScheduleChoice, EachScheduleHoldsItsOwnActivations) {
  PlanRequest request = uniform_profile_request();
  request.cluster = four_devices(1000);
  request.cluster.devices_per_node = 2;
  request.global_batch = 16;  // m = 4 microbatches of 4
  const auto memory = [&](const char* name) {
    const PlanCandidate c = evaluate_candidate(request, name, 2, 4, false);
    EXPECT_TRUE(c.fits) << name << ": " << c.rejected;
    EXPECT_EQ(c.partition, (std::vector<int>{3, 3})) << name;
    return c.worker_memory_bytes.at(0);
  };
  EXPECT_DOUBLE_EQ(memory("zb-h2") - memory("1f1b"), 3e3);
  EXPECT_DOUBLE_EQ(memory("zb-h1"), memory("1f1b"));
  EXPECT_DOUBLE_EQ(memory("gpipe") - memory("1f1b"), 2 * 3e3);  // m = 4 in flight
  // The first stage runs whole backwards (schedule::lower_schedule): all of it W, none B.
  const PlanCandidate zb = evaluate_candidate(request, "zb-h1", 2, 4, false);
  EXPECT_DOUBLE_EQ(zb.costs.stages.at(0).input_ms, 0.0);
  EXPECT_DOUBLE_EQ(zb.costs.stages.at(0).weight_ms, 6.0);
  EXPECT_DOUBLE_EQ(zb.costs.stages.at(1).input_ms, 3.0);
  EXPECT_DOUBLE_EQ(zb.costs.stages.at(1).weight_ms, 3.0);
}

}  // namespace
}  // namespace pipetrain::plan
