// The simulator against the closed forms of each schedule, uniform costs, p in 1..8, m in 1..16.
#include <gtest/gtest.h>

#include <algorithm>

#include "schedule/generators.h"
#include "schedule/text_format.h"
#include "sim/simulator.h"
#include "sim/timeline.h"

namespace pipetrain::sim {
namespace {
using schedule::ScheduleSpec;

struct Costs {
  double tf, tb, tw;  // per worker's share of the model; tb is the full backward, tw within it
};
const Costs kCostSets[] = {{1.0, 2.0, 1.0}, {1.0, 1.0, 0.5}, {2.0, 3.0, 1.0}};

ScheduleSpec spec_of(const std::string& name, int p, int m, const Costs& c, int v = 1,
                     int iterations = 1) {
  ScheduleSpec spec;
  spec.name = name;
  spec.stages = p;
  spec.microbatches = m;
  spec.chunks = v;
  spec.iterations = iterations;
  spec.nominal_forward = c.tf;
  spec.nominal_backward = c.tb;
  spec.nominal_weight = c.tw;
  return spec;
}

SimResult run(const ScheduleSpec& spec, const Costs& c) {
  StageCost cost;
  cost.forward_ms = c.tf;
  cost.backward_ms = c.tb;
  cost.weight_ms = c.tw;
  return simulate(schedule::make_schedule(spec), uniform_cost_model(cost, spec.chunks));
}

constexpr double kEps = 1e-9;

TEST(ClosedForms, GpipeAnd1f1bIterationTimeAndBubble) {
  for (const Costs& c : kCostSets)
    for (const char* name : {"gpipe", "1f1b"})
      for (int p = 1; p <= 8; ++p)
        for (int m = 1; m <= 16; ++m) {
          SimResult r = run(spec_of(name, p, m, c), c);
          ASSERT_NEAR(r.iteration_ms, (m + p - 1) * (c.tf + c.tb), kEps)
              << name << " p=" << p << " m=" << m;
          for (int w = 0; w < p; ++w)
            ASSERT_NEAR(r.bubble_fraction[w], double(p - 1) / (m + p - 1), kEps);
        }
}

TEST(ClosedForms, OneF1bPeakActivationsVsGpipe) {
  const Costs c = kCostSets[0];
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 16; ++m) {
      SimResult one = run(spec_of("1f1b", p, m, c), c);
      SimResult gpipe = run(spec_of("gpipe", p, m, c), c);
      for (int s = 0; s < p; ++s) {
        EXPECT_NEAR(one.peak_activation_bytes[s], std::min(p - s, m), kEps);
        EXPECT_NEAR(gpipe.peak_activation_bytes[s], m, kEps);
      }
    }
}

// `name` over p workers and m microbatches with gradients of g bytes and a workspace of w bytes
// per stage, uniform costs.
SimResult held_run(const char* name, int p, int m, double g, double w) {
  StageCost cost;
  cost.gradient_bytes = g;
  cost.workspace_bytes = w;
  return simulate(schedule::make_schedule(spec_of(name, p, m, kCostSets[0])), uniform_cost_model(cost, 1));
}

// Gradients of G bytes exist from a stage's first backward of the step: GPipe peaks at
// max(m, m - 1 + G) (its first backward frees a microbatch as the gradients appear), 1F1B at
// p - s + G once a forward follows its first backward (m > p - s), else as GPipe.
TEST(ClosedForms, PeakHeldCountsGradientsFromTheFirstBackward) {
  for (const double g : {0.5, 3.0})
    for (int p = 1; p <= 6; ++p)
      for (int m = 1; m <= 10; ++m) {
        const SimResult one = held_run("1f1b", p, m, g, 0), gpipe = held_run("gpipe", p, m, g, 0);
        for (int s = 0; s < p; ++s) {
          const double held_back = std::max<double>(m, m - 1 + g);
          EXPECT_NEAR(gpipe.peak_held_bytes[s], held_back, kEps) << "p=" << p << " m=" << m << " g=" << g;
          EXPECT_NEAR(one.peak_held_bytes[s], m > p - s ? p - s + g : held_back, kEps)
              << "p=" << p << " m=" << m << " s=" << s << " g=" << g;
          EXPECT_NEAR(one.peak_activation_bytes[s], std::min(p - s, m), kEps);  // unchanged
        }
      }
}

// A compute action's workspace W counts while it runs: GPipe at m >= 2 peaks at
// max(m, m - 1 + G) + W, in a forward or a backward.
TEST(ClosedForms, PeakHeldCountsTheRunningActionsWorkspace) {
  for (const double g : {0.5, 3.0})
    for (int p = 1; p <= 6; ++p)
      for (int m = 2; m <= 10; ++m) {
        const SimResult gpipe = held_run("gpipe", p, m, g, 7);
        for (int s = 0; s < p; ++s) {
          EXPECT_NEAR(gpipe.peak_held_bytes[s], std::max<double>(m, m - 1 + g) + 7, kEps)
              << "p=" << p << " m=" << m << " g=" << g;
        }
      }
}

// With replicas (dp_width 2) a stage's AllReduceGrads copies its G bytes of gradients into one
// flat buffer: a flushing step's stages peak there, after their last backward, at 2 G (G far
// above the m activations); alone (dp_width 1) as above, in the first backward. GPT-2 small's
// embedding stage peaked there 150 MiB (its gradients) above the model before this was counted.
TEST(ClosedForms, PeakHeldCountsTheReplicaSumsFlatCopyOfTheGradients) {
  const double g = 100;
  for (const char* name : {"gpipe", "1f1b"})
    for (int p = 1; p <= 4; ++p)
      for (int m = 1; m <= 6; ++m)
        for (int width : {1, 2}) {
          ScheduleSpec spec = spec_of(name, p, m, kCostSets[0]);
          spec.dp_width = width;
          StageCost cost;
          cost.gradient_bytes = g;
          cost.allreduce_ms = 0.5;  // (a transient counts over its action's time)
          const SimResult r = simulate(schedule::make_schedule(spec), uniform_cost_model(cost, 1));
          for (int s = 0; s < p; ++s) {
            const bool gpipe = name[0] == 'g';
            const double alone = gpipe || m <= p - s ? m - 1 + g : p - s + g;  // (as above)
            EXPECT_NEAR(r.peak_held_bytes[s], width == 2 ? 2 * g : alone, kEps)
                << name << " p=" << p << " m=" << m << " width=" << width << " s=" << s;
            EXPECT_NEAR(r.peak_activation_bytes[s], gpipe ? m : std::min(p - s, m), kEps);
          }
        }
}

// A worker of several chunks updates them all at its last OptimizerStep (the runtime's global
// norm needs every chunk's gradients): with gradients G far above the activations, each
// worker's peak is its v chunks' v G plus at most its peak activations. (Released at each
// chunk's own step, a V's head chunk, done first, freed its G before the embedding's backward:
// GPT-2 medium's worker 0 predicted 196 MiB low.)
TEST(ClosedForms, PeakHeldKeepsEveryChunksGradientsToTheWorkersUpdate) {
  const double g = 1000;
  for (const char* name : {"zb-v", "interleaved", "bfs"})
    for (int p = 2; p <= 6; p += 2)
      for (int m : {p, 2 * p}) {
        StageCost cost;
        cost.gradient_bytes = g;
        const SimResult r = simulate(schedule::make_schedule(spec_of(name, p, m, kCostSets[0], 2)),
                                     uniform_cost_model(cost, 2));
        for (int w = 0; w < p; ++w) {
          EXPECT_GE(r.peak_held_bytes[w], 2 * g) << name << " p=" << p << " m=" << m << " w=" << w;
          EXPECT_LE(r.peak_held_bytes[w], 2 * g + r.peak_activation_bytes[w])
              << name << " p=" << p << " m=" << m << " w=" << w;
        }
      }
}

// One worker's split backward of two microbatches: F F I I W W, then the update.
schedule::Schedule one_worker_split_backward() {
  return schedule::parse_csv(
      "# pipetrain-schedule v1\n"
      "# name=zb-h1 workers=1 chunks=1 microbatches=2 slices=1 iterations=1 dp_width=1\n"
      "# policy=sync predict_backward=0 placement=looping\n"
      "worker,kind,iteration,microbatch,slice,chunk,version,peer\n"
      "0,Forward,0,0,0,0,0,-1\n0,Forward,0,1,0,0,0,-1\n"
      "0,BackwardInput,0,0,0,0,0,-1\n0,BackwardInput,0,1,0,0,0,-1\n"
      "0,BackwardWeight,0,0,0,0,0,-1\n0,BackwardWeight,0,1,0,0,0,-1\n"
      "0,OptimizerStep,0,0,0,0,1,-1\n");
}

// A stage's first W pass makes every gradient while it frees its microbatch's activations and
// keeps the recorded output gradients to its end; the later ones make a temporary gradient (the
// workspace) beside the held ones. One worker, F F I I W W: activations A = 10, recorded
// gradients R = 4, gradients G = 100, workspace S = 1 per action. The first W's start peaks at
// 2 A + 2 R - A + G = 118 (counting the gradients from its end, the later W's 115). With nothing
// recorded (a first stage: no input gradient) the W is a whole backward keeping its graph to its
// end: 2 A + G = 120 (as a whole backward that frees as it goes, 111).
TEST(ClosedForms, PeakHeldCountsTheFirstWeightPassesGradientsFromItsStart) {
  StageCost cost;
  cost.forward_ms = 1, cost.backward_ms = 2, cost.weight_ms = 1;
  cost.activation_bytes = 10, cost.weight_pass_bytes = 4, cost.gradient_bytes = 100;
  cost.workspace_bytes = 1;
  const SimResult r = simulate(one_worker_split_backward(), uniform_cost_model(cost, 1));
  EXPECT_NEAR(r.peak_held_bytes[0], 118, kEps);
  EXPECT_NEAR(r.peak_activation_bytes[0], 28, kEps);  // 2 A + 2 R before the first W: unchanged
  cost.weight_pass_bytes = 0;
  const SimResult first_stage = simulate(one_worker_split_backward(), uniform_cost_model(cost, 1));
  EXPECT_NEAR(first_stage.peak_held_bytes[0], 120, kEps);
}

// The same list action by action (`plan --svg` draws it): A = 10, R = 4, G = 100 and a workspace
// of 1. F: +A (+1 while it runs); B: +R; the first W +1 at its start, then swaps A for G, and
// frees R at its end; the second W +1, then frees its R and A; the update lets go of G.
TEST(ClosedForms, HeldDuringActionsFollowsTheListActionByAction) {
  StageCost cost;
  cost.forward_ms = 1, cost.backward_ms = 2, cost.weight_ms = 1;
  cost.activation_bytes = 10, cost.weight_pass_bytes = 4, cost.gradient_bytes = 100;
  cost.workspace_bytes = 1;
  const schedule::Schedule list = one_worker_split_backward();
  const CostModel costs = uniform_cost_model(cost, 1);
  const auto held = held_during_actions(list, costs, 0, simulate(list, costs));
  const std::vector<double> peaks{11, 21, 25, 29, 118, 115, 100}, ends{10, 20, 24, 28, 114, 100, 0};
  ASSERT_EQ(held.size(), peaks.size());
  for (size_t k = 0; k < held.size(); ++k) {
    EXPECT_NEAR(held[k].peak, peaks[k], kEps) << "action " << k;
    EXPECT_NEAR(held[k].at_end, ends[k], kEps) << "action " << k;
  }
}

// A split backward's passes have workspaces of their own: B's beyond what it records, a later
// W's (weight gradients only). The list above with A = 10, R = 4, G = 100 and S = 30 for F and
// B: the second W starts at 2 A + 2 R - A + G - R = 114 and adds its workspace (unknown: S, 144;
// 20: 134; the first W's, 30 or 20 on its start's 28, is below); with none the first W's swap
// peaks (118), unless B's own workspace of 100 tops it, at the second B: 2 A + 2 R + 100 = 128.
TEST(ClosedForms, PeakHeldCountsASplitBackwardsPassesOwnWorkspaces) {
  StageCost cost;
  cost.forward_ms = 1, cost.backward_ms = 2, cost.weight_ms = 1;
  cost.activation_bytes = 10, cost.weight_pass_bytes = 4, cost.gradient_bytes = 100;
  cost.workspace_bytes = 30;
  const auto peak = [&](double input_workspace, double weight_workspace) {
    cost.input_workspace_bytes = input_workspace;
    cost.weight_workspace_bytes = weight_workspace;
    return simulate(one_worker_split_backward(), uniform_cost_model(cost, 1)).peak_held_bytes[0];
  };
  EXPECT_NEAR(peak(-1, -1), 144, kEps);
  EXPECT_NEAR(peak(-1, 20), 134, kEps);
  EXPECT_NEAR(peak(-1, 0), 118, kEps);
  EXPECT_NEAR(peak(100, 0), 128, kEps);
  // The first W's first junction makes its weight gradient before anything is freed: with
  // gradients G = 1 and a W workspace of 50 it peaks at its start, 2 A + 2 R + 50 = 78 (the swap
  // leaves 2 A + 2 R - A + G = 19; the second W 19 - R + 50 = 65).
  cost.gradient_bytes = 1;
  EXPECT_NEAR(peak(-1, 50), 78, kEps);
}

// A whole backward's own workspace, where a stage's forward needs more (chunked cross-entropy's
// head): one worker, F F B B (GPipe's), A = 10, G = 100, workspace S = 50 (the forward's). The
// second B meets the gradients the first made: A + G + S = 160 with the forward's workspace
// taken for it, A + G + 5 = 115 with the backward's own 5; the second F, 2 A + S = 70, stays
// below either.
TEST(ClosedForms, PeakHeldTakesAWholeBackwardsOwnWorkspace) {
  StageCost cost;
  cost.forward_ms = 1, cost.backward_ms = 2;
  cost.activation_bytes = 10, cost.gradient_bytes = 100, cost.workspace_bytes = 50;
  const schedule::Schedule list = schedule::parse_csv(
      "# pipetrain-schedule v1\n"
      "# name=gpipe workers=1 chunks=1 microbatches=2 slices=1 iterations=1 dp_width=1\n"
      "# policy=sync predict_backward=0 placement=looping\n"
      "worker,kind,iteration,microbatch,slice,chunk,version,peer\n"
      "0,Forward,0,0,0,0,0,-1\n0,Forward,0,1,0,0,0,-1\n"
      "0,Backward,0,0,0,0,0,-1\n0,Backward,0,1,0,0,0,-1\n"
      "0,OptimizerStep,0,0,0,0,1,-1\n");
  EXPECT_NEAR(simulate(list, uniform_cost_model(cost, 1)).peak_held_bytes[0], 160, kEps);
  cost.backward_workspace_bytes = 5;
  EXPECT_NEAR(simulate(list, uniform_cost_model(cost, 1)).peak_held_bytes[0], 115, kEps);
}

// Megatron: bubble time (p-1)(tf+tb)/v, i.e. (p-1)/(v m) of the ideal m (tf+tb); as a share of
// the iteration (p-1)/(v m + p - 1). Exact for looped BFS (m >= p) and interleaved 1F1B
// (m % p == 0) at every cost set, with sends posted asynchronously as the runtime does.
void expect_megatron_bubble(const char* name, const Costs& c, int v, int p, int m) {
  SimResult r = run(spec_of(name, p, m, c, v), c);
  double formula = m * (c.tf + c.tb) + (p - 1) * (c.tf + c.tb) / v;
  ASSERT_NEAR(r.iteration_ms, formula, kEps) << name << " v=" << v << " p=" << p << " m=" << m;
  for (int w = 0; w < p; ++w)
    ASSERT_NEAR(r.bubble_fraction[w], double(p - 1) / (v * m + p - 1), kEps);
}

TEST(ClosedForms, InterleavedBubble) {
  for (const Costs& c : kCostSets)
    for (int v : {1, 2, 3, 4})
      for (int p = 1; p <= 8; ++p)
        for (int m = p; m <= 16; m += p) expect_megatron_bubble("interleaved", c, v, p, m);
}

TEST(ClosedForms, LoopedBfsBubble) {
  for (const Costs& c : kCostSets)
    for (int v : {1, 2, 3, 4})
      for (int p = 1; p <= 8; ++p)
        for (int m = p; m <= 16; ++m) expect_megatron_bubble("bfs", c, v, p, m);
}

// Zero bubble ZB-H1: iteration m(tf+tb) + (p-1)(tf + tb_input - tw), tb_input = tb - tw, for
// every cost set (W cheaper than, or as costly as, F and B), at 1F1B's peak memory (p on
// worker 0, never more than p anywhere).
TEST(ClosedForms, ZbH1Bubble) {
  for (const Costs& c : kCostSets)
    for (int p = 1; p <= 8; ++p)
      for (int m = p; m <= 16; ++m) {
        SimResult r = run(spec_of("zb-h1", p, m, c), c);
        double input = c.tb - c.tw;
        double formula = m * (c.tf + c.tb) + (p - 1) * (c.tf + input - c.tw);
        ASSERT_NEAR(r.iteration_ms, formula, kEps) << "tf=" << c.tf << " p=" << p << " m=" << m;
        for (int w = 0; w < p; ++w) ASSERT_LE(r.stats.peak_inflight[w], p) << "worker " << w;
        ASSERT_EQ(r.stats.peak_inflight[0], p);
      }
}

TEST(ClosedForms, NoFlushSchedulesHaveNoSteadyStateBubble) {
  for (const Costs& c : kCostSets)
    for (const char* name : {"2bw", "pipedream", "pipeoptim", "spectrain"})
      for (int p = 1; p <= 8; ++p)
        for (int m = p; m <= 16; m += 3) {
          SimResult r = run(spec_of(name, p, m, c, 1, 6), c);
          ASSERT_NEAR(r.iteration_ms, m * (c.tf + c.tb), kEps) << name << " p=" << p;
          for (int w = 0; w < p; ++w) ASSERT_NEAR(r.bubble_fraction[w], 0.0, kEps);
          ASSERT_NEAR(r.microbatches_per_s, 1000.0 / (c.tf + c.tb), 1e-6);
        }
}

// pipetrain's runtime synchronises every update (global gradient norm): the k-th update of
// every worker starts together, which gives part of the flush's bubble back to 2BW, never more.
TEST(ClosedForms, SynchronousUpdatesStartTogether) {
  for (const Costs& c : kCostSets)
    for (int p = 2; p <= 6; ++p)
      for (int m = p; m <= 12; m += 2) {
        const auto schedule = schedule::make_schedule(spec_of("2bw", p, m, c, 1, 6));
        StageCost cost;
        cost.forward_ms = c.tf, cost.backward_ms = c.tb, cost.weight_ms = c.tw;
        cost.optimizer_ms = 0.25;
        CostModel model = uniform_cost_model(cost);
        model.synchronous_updates = true;
        const SimResult r = simulate(schedule, model);
        std::vector<std::vector<double>> starts(static_cast<size_t>(p));
        for (int w = 0; w < p; ++w)
          for (size_t k = 0; k < schedule.actions[w].size(); ++k)
            if (schedule.actions[w][k].kind == schedule::ActionKind::OptimizerStep)
              starts[size_t(w)].push_back(r.times[w][k].start);
        for (int w = 1; w < p; ++w) ASSERT_EQ(starts[size_t(w)], starts[0]) << "p=" << p << " m=" << m;
        const double free_updates = m * (c.tf + c.tb) + 0.25;
        ASSERT_GT(r.iteration_ms, free_updates + kEps) << "p=" << p << " m=" << m;
        ASSERT_LE(r.iteration_ms, (m + p - 1) * (c.tf + c.tb) + 0.25 + kEps) << "p=" << p << " m=" << m;
        model.synchronous_updates = false;
        ASSERT_NEAR(simulate(schedule, model).iteration_ms, free_updates, kEps);
      }
  // A flushed schedule's updates are aligned by the flush already: nothing changes.
  const Costs c = kCostSets[0];
  StageCost cost;
  cost.optimizer_ms = 0.5;
  CostModel model = uniform_cost_model(cost);
  const auto gpipe = schedule::make_schedule(spec_of("gpipe", 4, 8, c));
  const double local = simulate(gpipe, model).makespan_ms;
  model.synchronous_updates = true;
  EXPECT_NEAR(simulate(gpipe, model).makespan_ms, local, kEps);
}

// With v chunks a worker has v OptimizerSteps per iteration, but the runtime runs the update
// (and its global-norm collective) once, at the last: that is where the workers meet. Meeting
// at the first instead deadlocks interleaved 1F1B (an earlier chunk's update precedes a recv).
TEST(ClosedForms, SynchronousUpdatesWithChunksMeetAtTheLastUpdate) {
  for (const char* name : {"interleaved", "bfs"})
    for (int p = 2; p <= 4; ++p)
      for (int m = p; m <= 3 * p; m += p) {
        const Costs c = kCostSets[0];
        const auto schedule = schedule::make_schedule(spec_of(name, p, m, c, 2));
        StageCost cost;
        cost.forward_ms = c.tf, cost.backward_ms = c.tb, cost.weight_ms = c.tw;
        CostModel model = uniform_cost_model(cost, 2);
        const double local = simulate(schedule, model).iteration_ms;
        model.synchronous_updates = true;
        const SimResult r = simulate(schedule, model);
        // Free updates after a flush: already aligned, so the barrier changes nothing.
        ASSERT_NEAR(r.iteration_ms, local, kEps) << name << " p=" << p << " m=" << m;
        std::vector<double> last_update_start(size_t(p), -1);
        for (int w = 0; w < p; ++w)
          for (size_t k = 0; k < schedule.actions[w].size(); ++k)
            if (schedule.actions[w][k].kind == schedule::ActionKind::OptimizerStep)
              last_update_start[size_t(w)] = r.times[w][k].start;
        for (int w = 1; w < p; ++w) ASSERT_EQ(last_update_start[size_t(w)], last_update_start[0]);
      }
}

// The replica all-reduce (allreduce_ms = A at w = 2) as the runtime runs it. A flush schedule
// waits for it at its update: 1F1B's iteration grows by all of A. A no-flush schedule posts it and
// goes on; the first action that needs the update waits for what is left, then the update (its
// optimizer time u) is applied. 2BW at p = 2, m = 4 (`pipetrain simulate --schedule 2bw -p 2 -m 4
// -w 2 --show-transfers --show-versions`): worker 0 posts iteration g's all-reduce after
// B(g,3), and its first reader of version g+1 is F(g+2,0), after u and F(g+1,1..3), B(g+1,0..2):
// a slack of 3 tf + 3 tb; then F(g+2,0) and B(g+1,3) before it posts the next. Worker 1 computes
// a whole iteration, 4 (tf + tb), between its updates. So an iteration takes
// u + max(slack, A) + tf + tb = m (tf + tb) + u + max(0, A - slack).
TEST(ClosedForms, NoFlushSchedulesOverlapTheReplicaAllReduce) {
  for (const Costs& c : kCostSets)
    for (const double update_ms : {0.0, 0.25}) {
      const double slack = 3 * c.tf + 3 * c.tb;
      for (const double allreduce : {0.0, 0.5 * slack, slack, slack + 1.0, 3.0 * slack}) {
        StageCost cost;
        cost.forward_ms = c.tf, cost.backward_ms = c.tb, cost.weight_ms = c.tw;
        cost.optimizer_ms = update_ms;
        cost.allreduce_ms = allreduce;
        ScheduleSpec two_bw = spec_of("2bw", 2, 4, c, 1, 8), flush = spec_of("1f1b", 2, 4, c);
        two_bw.dp_width = flush.dp_width = 2;
        const SimResult posted = simulate(schedule::make_schedule(two_bw), uniform_cost_model(cost));
        ASSERT_NEAR(posted.iteration_ms, 4 * (c.tf + c.tb) + update_ms + std::max(0.0, allreduce - slack), kEps)
            << "tf=" << c.tf << " tb=" << c.tb << " A=" << allreduce << " u=" << update_ms;
        // Drawn as the posting, as a real run's trace shows it.
        const auto lists = schedule::make_schedule(two_bw);
        const Timeline timeline = timeline_from_simulation(lists, posted);
        for (int w = 0; w < 2; ++w) {
          for (size_t k = 0; k < lists.actions[size_t(w)].size(); ++k) {
            if (lists.actions[size_t(w)][k].kind == schedule::ActionKind::AllReduceGrads) {
              ASSERT_EQ(timeline.events[size_t(w)][k].duration_ms, 0.0);
            }
          }
        }
        const SimResult blocking = simulate(schedule::make_schedule(flush), uniform_cost_model(cost));
        ASSERT_NEAR(blocking.iteration_ms, 5 * (c.tf + c.tb) + update_ms + allreduce, kEps)
            << "tf=" << c.tf << " tb=" << c.tb << " A=" << allreduce << " u=" << update_ms;
      }
    }
}

TEST(ClosedForms, TransfersAndUpdatesCostTime) {
  const Costs c = kCostSets[0];
  StageCost cost;
  cost.transfer_bytes = 100;
  cost.optimizer_ms = 0.5;
  CostModel model = uniform_cost_model(cost);
  model.p2p_latency_ms = 0.1;
  model.bandwidth_bytes_per_ms = 1000;
  SimResult r = simulate(schedule::make_schedule(spec_of("gpipe", 2, 1, c)), model);
  // F0, transfer, F1 B1, transfer, B0, optimizer step on worker 0.
  EXPECT_NEAR(r.makespan_ms, 1 + 0.2 + 3 + 0.2 + 2 + 0.5, kEps);
  // Posting a send keeps the sender busy (0.05 ms + 100 bytes at 500 bytes/ms = 0.25 ms), and
  // the data leaves after it: both sends lie on the critical path.
  model.send_post_ms = 0.05;
  model.send_post_bytes_per_ms = 500;
  r = simulate(schedule::make_schedule(spec_of("gpipe", 2, 1, c)), model);
  EXPECT_NEAR(r.makespan_ms, 1 + 0.25 + 0.2 + 3 + 0.25 + 0.2 + 2 + 0.5, kEps);
}

}  // namespace
}  // namespace pipetrain::sim
