// Step bounds: steps tile each worker's list, no step waits for a peer's later step (the
// workers meet between steps), and no-flush steps run on past their update without reading
// the version it makes.
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "cut_lists.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/steps.h"

namespace pipetrain::schedule {
namespace {

// Step of each action, per worker.
std::vector<std::vector<int>> step_of_actions(const Schedule& s, const std::vector<StepBounds>& bounds) {
  std::vector<std::vector<int>> steps(size_t(s.workers));
  for (int w = 0; w < s.workers; ++w) {
    steps[size_t(w)].assign(s.actions[size_t(w)].size(), -1);
    for (size_t k = 0; k < bounds[size_t(w)].size(); ++k) {
      for (size_t i = bounds[size_t(w)][k].first; i < bounds[size_t(w)][k].second; ++i) steps[size_t(w)][i] = int(k);
    }
  }
  return steps;
}

void expect_sound(const Schedule& s, int first_step, const std::string& label) {
  std::vector<StepBounds> bounds;
  for (int w = 0; w < s.workers; ++w) bounds.push_back(step_bounds(s, w, first_step));
  const auto steps = step_of_actions(s, bounds);
  std::map<std::tuple<int, int, bool, int, int>, int> send_step;  // (from, to, grad, it, mb)
  for (int w = 0; w < s.workers; ++w) {
    ASSERT_EQ(bounds[size_t(w)].size(), size_t(s.iterations)) << label;
    size_t at = 0;
    for (int k = first_step; k < s.iterations; ++k) {
      EXPECT_EQ(bounds[size_t(w)][size_t(k)].first, at) << label << " worker " << w << " step " << k;
      at = bounds[size_t(w)][size_t(k)].second;
    }
    EXPECT_EQ(at, s.actions[size_t(w)].size()) << label;
    const auto& list = s.actions[size_t(w)];
    for (size_t i = 0; i < list.size(); ++i) {
      if (is_send(list[i].kind)) {
        send_step[{w, list[i].peer, list[i].kind == ActionKind::SendGrad, list[i].iteration, list[i].microbatch}] =
            steps[size_t(w)][i];
      }
    }
  }
  for (int w = 0; w < s.workers; ++w) {
    const auto& list = s.actions[size_t(w)];
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_recv(a.kind)) continue;
      const int k = steps[size_t(w)][i];
      const int sent = send_step.at({a.peer, w, a.kind == ActionKind::RecvGrad, a.iteration, a.microbatch});
      EXPECT_LE(sent, k) << label << ": worker " << w << " receives in step " << k << " what worker "
                         << a.peer << " sends in step " << sent;
    }
    // Past the step's last update (its run-on), nothing reads the version that update makes.
    for (const auto& [begin, end] : bounds[size_t(w)]) {
      size_t last_update = end;
      for (size_t i = begin; i < end; ++i) {
        if (list[i].kind == ActionKind::OptimizerStep) last_update = i;
      }
      for (size_t i = last_update + 1; i < end; ++i) {
        if (is_compute(list[i].kind)) {
          EXPECT_LT(list[i].version, list[last_update].version) << label;
        }
      }
    }
  }
}

TEST(StepBounds, NoStepWaitsForAPeersLaterStep) {
  for (const auto& entry : schedule_catalogue()) {
    for (int p : {2, 3, 4}) {
      for (int m : {1, p - 1, p, 2 * p}) {
        ScheduleSpec spec;
        spec.name = entry.name;
        spec.stages = p;
        spec.microbatches = m;
        spec.iterations = entry.flushes() ? 1 : 5;
        if (!entry.check(spec).empty()) continue;
        const Schedule s = make_schedule(spec);
        const std::string label = entry.name + " p=" + std::to_string(p) + " m=" + std::to_string(m);
        expect_sound(s, 0, label);
        if (!entry.flushes()) expect_sound(cut_to(s, 2), 2, label + " resumed at step 2");
        if (!entry.parameters.sync_warmup) continue;
        spec.sync_iterations = 2;  // flushed steps 0 and 1, then the rule
        const Schedule warmed = make_schedule(spec);
        for (int cut : {0, 1, 2, 3}) {
          expect_sound(cut_to(warmed, cut), cut, label + " after 2 synchronous steps, from step " +
                                                     std::to_string(cut));
        }
      }
    }
  }
}

// The overlap is real: 2BW's last stage runs group 1's work between its first update and the
// end of step 0, and stage 0 its forwards of group 1 that read the old version.
TEST(StepBounds, TwoBWStepsRunOnPastTheirUpdate) {
  ScheduleSpec spec;
  spec.name = "2bw";
  spec.stages = 2;
  spec.microbatches = 2;
  spec.iterations = 3;
  const Schedule s = make_schedule(spec);
  const std::vector<StepBounds> bounds{step_bounds(s, 0, 0), step_bounds(s, 1, 0)};
  for (int w = 0; w < 2; ++w) {
    const auto& list = s.actions[size_t(w)];
    size_t update = 0;
    while (!(list[update].kind == ActionKind::OptimizerStep && list[update].iteration == 0)) ++update;
    const size_t end = bounds[size_t(w)][0].second;
    EXPECT_GT(end, update + 1) << "worker " << w << " stops at its update";
    int computes = 0;
    for (size_t i = update + 1; i < end; ++i) computes += is_compute(list[i].kind) ? 1 : 0;
    EXPECT_GE(computes, 2) << "worker " << w;  // at least a forward and a backward of group 1
  }
  // A flush schedule's one iteration is one step.
  spec.name = "1f1b";
  spec.iterations = 1;
  const Schedule flush = make_schedule(spec);
  EXPECT_EQ(step_bounds(flush, 0, 0).size(), 1u);
  EXPECT_EQ(step_bounds(flush, 1, 0)[0].second, flush.actions[1].size());
}

}  // namespace
}  // namespace pipetrain::schedule
