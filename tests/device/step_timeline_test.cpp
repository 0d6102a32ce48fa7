// device::summarize_timeline on timelines built by hand: the operators the host ran at top level,
// the GPU's busy time and gaps, the host's launches and waits.
#include <gtest/gtest.h>

#include "device/step_timeline.h"

namespace pipetrain::device {
namespace {

using Kind = TimedEvent::Kind;

TimedEvent op(const std::string& name, uint64_t start, uint64_t end, uint64_t thread = 1) {
  return {name, Kind::HostOperator, start, end, thread};
}
TimedEvent kernel(uint64_t start, uint64_t end) { return {"kernel", Kind::DeviceWork, start, end, 0}; }
TimedEvent call(const std::string& name, uint64_t start, uint64_t end) {
  return {name, Kind::RuntimeCall, start, end, 1};
}

TEST(StepTimeline, CountsTheOperatorsNoOtherOperatorOnTheirThreadEncloses) {
  const StepTimeline t = summarize_timeline({
      {"a step", Kind::Annotation, 0, 300, 1},  // a scope: encloses nothing as an operator
      op("aten::linear", 0, 100), op("aten::addmm", 10, 90), op("aten::to", 12, 20),
      // The engine's wrapper: the backward node inside is the operator, its mm is the node's.
      op("autograd::engine::evaluate_function: AddmmBackward0", 110, 200),
      op("AddmmBackward0", 111, 199), op("aten::mm", 120, 150),
      op("aten::add_", 205, 215),
      op("aten::mm", 50, 60, /*thread=*/2),  // another thread: its own top level
  });
  EXPECT_EQ(t.host_operators, 4);
  EXPECT_EQ(t.top_level_calls, (std::map<std::string, int64_t>{
                                   {"AddmmBackward0", 1}, {"aten::add_", 1}, {"aten::linear", 1}, {"aten::mm", 1}}));
  EXPECT_EQ(t.host_operator_ns, 100u + 88 + 10 + 10);
  EXPECT_EQ(t.wall_ns, 300u);
  EXPECT_EQ(t.device_busy_ns, 0u);
  EXPECT_EQ(t.launches, 0);
}

TEST(StepTimeline, MergesTheGpusOverlappingWorkAndCountsTheGapsBetween) {
  const StepTimeline t = summarize_timeline({kernel(30, 40), kernel(0, 10), kernel(5, 20),
                                             kernel(40, 50),  // touches the one before: no gap
                                             kernel(100, 110), kernel(102, 104)});
  EXPECT_EQ(t.device_busy_ns, 20u + 20 + 10);
  EXPECT_EQ(t.device_gaps, 2);
  EXPECT_EQ(t.longest_gap_ns, 50u);
  EXPECT_EQ(t.wall_ns, 110u);
  EXPECT_EQ(t.host_operators, 0);
}

TEST(StepTimeline, CountsLaunchesAndTheCallsThatWaitForTheGpu) {
  const StepTimeline t = summarize_timeline({
      call("cudaLaunchKernel", 0, 2), call("cudaLaunchKernelExC", 2, 5), call("cuLaunchKernel", 5, 9),
      call("cudaGraphLaunch", 10, 15),
      call("cudaStreamSynchronize", 20, 27), call("cudaMemcpy", 30, 38),
      call("cudaMemcpyAsync", 40, 41), call("cudaEventRecord", 41, 42),  // neither
  });
  EXPECT_EQ(t.launches, 4);
  EXPECT_EQ(t.launch_ns, 2u + 3 + 4 + 5);
  EXPECT_EQ(t.waits, 2);
  EXPECT_EQ(t.wait_ns, 7u + 8);
}

TEST(StepTimeline, DescribesPerStepAndSpeaksOfTheGpuOnlyWhenItWorked) {
  const StepTimeline host_only = summarize_timeline({op("aten::mm", 0, 4000), op("aten::mm", 6000, 10000)});
  const std::string cpu = describe_timeline(host_only, 2);
  EXPECT_EQ(cpu, "Host: 1 operators a step at top level (autograd's backward nodes included), 4.0 us "
                 "each on average, 80.0% of the step\n  most called: 1 aten::mm\n");
  const StepTimeline several = summarize_timeline({op("aten::to", 0, 1), op("aten::mm", 2, 3), op("aten::to", 4, 5),
                                                   op("aten::add_", 6, 7), op("aten::to", 8, 9), op("aten::mm", 10, 11)});
  EXPECT_NE(describe_timeline(several, 1, 2).find("\n  most called: 3 aten::to, 2 aten::mm\n"), std::string::npos)
      << describe_timeline(several, 1, 2);
  StepTimeline gpu = host_only;
  gpu.device_busy_ns = 5000;
  gpu.device_gaps = 4;
  gpu.longest_gap_ns = 2000000;
  gpu.launches = 10;
  gpu.launch_ns = 30000;
  gpu.waits = 2;
  gpu.wait_ns = 1000000;
  EXPECT_NE(describe_timeline(gpu, 2).find(
                "GPU: busy 0.003 ms a step (50.0%), idle in 2 gaps a step (the longest 2.000 ms); the "
                "host launched 5 kernels or graphs a step (3.0 us each) and waited for the GPU 1 times "
                "a step (0.500 ms)\n"),
            std::string::npos)
      << describe_timeline(gpu, 2);
}

TEST(StepTimeline, AnEmptyTimelineIsAllZeros) {
  const StepTimeline t = summarize_timeline({});
  EXPECT_EQ(t.wall_ns, 0u);
  EXPECT_EQ(t.host_operators, 0);
  EXPECT_EQ(describe_timeline(t, 1).rfind("Host: 0 operators", 0), 0u);
}

}  // namespace
}  // namespace pipetrain::device
