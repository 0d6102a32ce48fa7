// Workers sharing fewer cores than they are (sim/shared_cores.h) against closed forms.
#include <gtest/gtest.h>

#include "schedule/generators.h"
#include "sim/simulator.h"

namespace pipetrain::sim {
namespace {

constexpr double kForward = 1.0, kBackward = 2.0;

SimResult simulate_on(const std::string& name, int p, int m, double cores, int iterations = 1,
                      int width = 1) {
  schedule::ScheduleSpec spec;
  spec.name = name;
  spec.stages = p;
  spec.microbatches = m;
  spec.iterations = iterations;
  spec.dp_width = width;
  StageCost cost;
  cost.forward_ms = kForward;
  cost.backward_ms = kBackward;
  CostModel costs = uniform_cost_model(cost);
  costs.shared_cores = cores;
  return simulate(schedule::make_schedule(spec), costs);
}

TEST(SharedCores, AsManyCoresAsWorkersChangeNothing) {
  for (const char* name : {"gpipe", "1f1b", "2bw"})
    for (int p : {1, 2, 4})
      for (int m : {1, 3, 8}) {
        if (std::string(name) == "2bw" && m < p) continue;  // 2BW needs m >= p
        const int iterations = 6;
        const double own = simulate_on(name, p, m, 0, iterations).iteration_ms;
        EXPECT_NEAR(simulate_on(name, p, m, p, iterations).iteration_ms, own, 1e-9)
            << name << " p=" << p << " m=" << m;
      }
}

// GPipe with one microbatch never has two workers computing at once: one core is enough.
TEST(SharedCores, AStrictlySequentialPipelineLosesNothingOnOneCore) {
  for (int p : {2, 3, 5}) {
    EXPECT_NEAR(simulate_on("gpipe", p, 1, 1).iteration_ms, p * (kForward + kBackward), 1e-9);
  }
}

// 2BW keeps every worker busy in its steady state, so on c cores an iteration takes all the
// workers' compute over c: p x m x (tf + tb) x width / c.
TEST(SharedCores, ABusySteadyStateTakesTheTotalComputeOverTheCores) {
  struct Case { int p, m, width; double cores; };
  for (const Case c : {Case{2, 4, 1, 1}, Case{4, 8, 1, 2}, Case{5, 5, 1, 2}, Case{2, 4, 2, 2}}) {
    const SimResult r = simulate_on("2bw", c.p, c.m, c.cores, 8, c.width);
    const double total = c.p * c.m * (kForward + kBackward) * c.width / c.cores;
    EXPECT_NEAR(r.iteration_ms, total, 0.01 * total) << "p=" << c.p << " m=" << c.m;
  }
}

// 1F1B's fill and drain leave cores idle that the total-compute floor does not see: with p = 5
// workers, m = 4 and 2 cores the iteration lies above the floor (60 / 2 = 30) and below the
// unshared pipeline's 8 x 3 = 24 stretched by 5/2.
TEST(SharedCores, FillAndDrainCostMoreThanTheComputeFloor) {
  const double floor = 5 * 4 * (kForward + kBackward) / 2.0;
  const double shared = simulate_on("1f1b", 5, 4, 2).iteration_ms;
  EXPECT_GT(shared, floor * 1.05);
  EXPECT_LT(shared, (4 + 5 - 1) * (kForward + kBackward) * 2.5);
}

TEST(SharedCores, NegativeCoresAreRefused) {
  EXPECT_ANY_THROW(simulate_on("1f1b", 2, 2, -1));
}

}  // namespace
}  // namespace pipetrain::sim
