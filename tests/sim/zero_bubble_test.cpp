// ZB-H2, ZB-V and DualPipeV against closed forms. Costs are per worker's share of the model:
// t_F forward, t_B input gradient, t_W weight gradient (the full backward is t_B + t_W); a V
// schedule's chunk takes half of each. "Extra" is the iteration time beyond a worker's compute,
// m (t_F + t_B + t_W); the zero-bubble paper calls it the bubble.
//   ZB-H2 (paper, Table 2): (p-1)(t_F + t_B - 2 t_W) with updates unsynchronised (its optimizer
//     post-validation: consecutive iterations interlock), 2p-1 microbatches in flight. With a
//     flush the fill of worker p-1 is not hidden: (p-1) max(t_F, t_F + t_B - 2 t_W).
//   ZB-V (paper, section 6, and its authors' comparison "assuming T_F = T_B = T_W": bubble 0, 1F1B's
//     activation memory): 0 at equal times when interlocked; (p-1) t_F / 2 (the fill, one chunk
//     forward per hop) with a flush; 2p chunk activations (= p of the worker's share) per worker.
//   DualPipeV (DeepSeek's DualPipe README: activation PP + 1 chunks for PP = 2p stages): at equal
//     times (p-1) t_F / 2 either way, 2p + 1 chunk activations per worker. DeepSeek's bubble
//     (PP/2 - 1)(F&B + B - 3W) with F&B = F + B (one compute stream) is twice that, 2 (p-1) t_F / 2:
//     its pair sends both outputs after both halves, where pipetrain sends the forward's output as
//     soon as it exists.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "sim/simulator.h"

namespace pipetrain::sim {
namespace {

struct Split {
  double f, b, w;  // t_F, t_B (input gradient only), t_W
};
const Split kEqual{1, 1, 1};
// Every set has 2 t_W <= t_F + t_B, where the paper's ZB-H2 formula holds.
const Split kSplits[] = {kEqual, {1, 0.5, 0.5}, {2, 2, 1}, {1, 2, 1}};

// p workers, m microbatches, a V schedule's two chunks.
schedule::ScheduleSpec split_spec(const std::string& name, int p, int m, int iterations = 1) {
  schedule::ScheduleSpec spec;
  spec.name = name;
  spec.stages = p;
  spec.microbatches = m;
  spec.chunks = schedule::schedule_entry(name).parameters.v_shape ? 2 : 1;
  spec.iterations = iterations;
  return spec;
}

SimResult simulate_split(const std::string& name, int p, int m, const Split& t, int iterations,
                         bool synchronous_updates = false) {
  schedule::ScheduleSpec spec = split_spec(name, p, m, iterations);
  spec.nominal_forward = t.f;
  spec.nominal_backward = t.b + t.w;
  spec.nominal_weight = t.w;
  StageCost cost;
  cost.forward_ms = t.f, cost.backward_ms = t.b + t.w, cost.weight_ms = t.w;
  CostModel model = uniform_cost_model(cost, spec.chunks);
  model.synchronous_updates = synchronous_updates;
  return simulate(schedule::make_schedule(spec), model);
}

double extra_ms(const SimResult& r, int m, const Split& t) { return r.iteration_ms - m * (t.f + t.b + t.w); }

constexpr double kEps = 1e-9;

TEST(ZeroBubbleClosedForms, ZbH2) {
  for (const Split& t : kSplits)
    for (int p = 1; p <= 6; ++p)
      for (int m = 2 * p - 1; m <= 3 * p + 1; ++m) {
        const double paper = (p - 1) * (t.f + t.b - 2 * t.w);
        ASSERT_NEAR(extra_ms(simulate_split("zb-h2", p, m, t, 6), m, t), paper, kEps)
            << "p=" << p << " m=" << m << " tf=" << t.f << " tb=" << t.b << " tw=" << t.w;
        const SimResult flushed = simulate_split("zb-h2", p, m, t, 1);
        ASSERT_NEAR(extra_ms(flushed, m, t), (p - 1) * std::max(t.f, t.f + t.b - 2 * t.w), kEps);
        for (int w = 0; w < p; ++w) ASSERT_EQ(flushed.stats.peak_inflight[w], 2 * p - 1);
      }
}

TEST(ZeroBubbleClosedForms, ZbV) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 2 * p - 1; m <= 3 * p + 1; ++m) {  // torch plans at least 2p-1
      ASSERT_NEAR(extra_ms(simulate_split("zb-v", p, m, kEqual, 6), m, kEqual), 0.0, kEps)
          << "p=" << p << " m=" << m;
      const SimResult flushed = simulate_split("zb-v", p, m, kEqual, 1);
      ASSERT_NEAR(extra_ms(flushed, m, kEqual), (p - 1) * kEqual.f / 2, kEps) << "p=" << p << " m=" << m;
      for (int w = 0; w < p; ++w) ASSERT_EQ(flushed.stats.peak_inflight[w], 2 * p);
    }
}

TEST(ZeroBubbleClosedForms, DualPipeV) {
  for (int p = 1; p <= 6; ++p)
    for (int m = 2 * p; m <= 4 * p + 1; ++m)
      for (int iterations : {1, 6}) {
        const SimResult r = simulate_split("dualpipev", p, m, kEqual, iterations);
        ASSERT_NEAR(extra_ms(r, m, kEqual), (p - 1) * kEqual.f / 2, kEps) << "p=" << p << " m=" << m;
        for (int w = 0; w < p; ++w) ASSERT_EQ(r.stats.peak_inflight[w], 2 * p + 1) << "p=" << p;
      }
}

// pipetrain's runtime all-reduces the global gradient norm in every update: behind that barrier
// the iterations cannot interlock, so the catalogue simulates one (a list of several, whose
// transfers interleave across iterations, would deadlock at the barrier), and the gain is gone.
TEST(ZeroBubbleClosedForms, AnUpdateBarrierUndoesTheInterlock) {
  for (const char* name : {"zb-h2", "zb-v"}) {
    const schedule::ScheduleEntry& entry = schedule::schedule_entry(name);
    EXPECT_TRUE(entry.flushes());
    EXPECT_EQ(entry.simulated_iterations(), 4);
    EXPECT_EQ(entry.simulated_iterations(true), 1);
    for (int p = 2; p <= 5; ++p) {
      const int m = 3 * p;
      const double flushed = simulate_split(name, p, m, kEqual, 1, true).iteration_ms;
      EXPECT_NEAR(flushed, simulate_split(name, p, m, kEqual, 1).iteration_ms, kEps);
      EXPECT_NEAR(simulate_split(name, p, m, kEqual, 6).iteration_ms, m * 3 * kEqual.f, kEps);
    }
  }
  EXPECT_EQ(schedule::schedule_entry("zb-h1").simulated_iterations(), 1);
}

// The model's first stage hands no input gradient back: its lists run whole backwards
// (schedule::lower_schedule), every later stage splits, and the first stage's time is its whole
// backward's wherever a split would have put the work. Kept split, the runtime's B there (nothing
// to compute) and W (the whole backward) stalled each W behind the next gradient's receive: in
// this simulation ZB-H2 at p = 2, m = 16 took 61 units instead of the paper's 49, ZB-V 55
// instead of 48.5.
TEST(ZeroBubbleFirstStage, RunsWholeBackwardsAndKeepsThePapersTimes) {
  for (const char* name : {"zb-h1", "zb-h2", "zb-v"})
    for (int p : {2, 4})
      for (int m : {2 * p, 4 * p}) {
        const schedule::ScheduleSpec spec = split_spec(name, p, m);
        const schedule::Schedule lists = schedule::make_schedule(spec);
        for (int w = 0; w < p; ++w)
          for (int chunk = 0; chunk < spec.chunks; ++chunk)
            EXPECT_EQ(schedule::splits_backward(lists.actions[w], chunk), lists.stage_of(w, chunk) > 0)
                << name << " p=" << p << " worker " << w << " chunk " << chunk;
        // The first stage's share of its backward called B (0, 1 or 2 of its 2 units) changes
        // nothing: it runs none.
        for (double first_input : {0.0, 1.0, 2.0}) {
          CostModel costs = uniform_cost_model({1, 2, 1}, spec.chunks);
          costs.stages.resize(size_t(p * spec.chunks), costs.stages.front());
          costs.stages[0].input_ms = first_input / spec.chunks;
          costs.stages[0].weight_ms = (2 - first_input) / spec.chunks;
          EXPECT_NEAR(simulate(lists, costs).iteration_ms,
                      simulate_split(name, p, m, kEqual, 1).iteration_ms, kEps)
              << name << " p=" << p << " m=" << m << " first stage B " << first_input;
        }
      }
}

}  // namespace
}  // namespace pipetrain::sim
