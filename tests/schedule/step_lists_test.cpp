// StepLists: a run's steps from a short, pumped list are exactly the whole generated list's steps
// (step_bounds), resumed steps are the old cut of the whole list, readers stay within the span,
// and a run far past the simulator's cap is made from a few hundred actions.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "cut_lists.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/step_lists.h"
#include "schedule/steps.h"

namespace pipetrain::schedule {
namespace {

std::vector<std::vector<Action>> whole_steps(const Schedule& s, int worker, int first_step) {
  std::vector<std::vector<Action>> steps;
  const auto& list = s.actions.at(size_t(worker));
  for (const auto& [begin, end] : step_bounds(s, worker, first_step)) {
    steps.emplace_back(list.begin() + long(begin), list.begin() + long(end));
  }
  return steps;
}

struct Case {
  std::string name;
  int stages, microbatches, chunks = 1, sync = 0;
};

std::string label_of(const Case& c, int iterations) {
  return fmt::format("{} p={} m={} v={} sync={} iterations={}", c.name, c.stages, c.microbatches,
                     c.chunks, c.sync, iterations);
}

ScheduleSpec spec_of(const Case& c, int iterations) {
  ScheduleSpec spec;
  spec.name = c.name;
  spec.stages = c.stages, spec.microbatches = c.microbatches, spec.chunks = c.chunks;
  spec.sync_iterations = c.sync, spec.iterations = iterations;
  return spec;
}

// Every no-flush schedule of the catalogue, at sizes whose steady part is pumped (up to 4x the
// short list) and with a synchronous warm-up long enough to be pumped too.
std::vector<Case> no_flush_cases() {
  std::vector<Case> cases;
  for (const auto& entry : schedule_catalogue()) {
    if (entry.flushes()) continue;
    for (const auto& [p, m] : {std::pair{2, 1}, {2, 2}, {3, 2}, {4, 2}, {4, 4}, {4, 8}, {3, 5}}) {
      Case c{entry.name, p, m};
      if (!entry.check(spec_of(c, 1)).empty()) continue;
      cases.push_back(c);
      if (entry.parameters.sync_warmup) cases.push_back({entry.name, p, m, 1, 9});
    }
  }
  return cases;
}

TEST(StepLists, PumpedStepsEqualTheWholeListsStepsForEveryNoFlushSchedule) {
  int compared = 0, pumped = 0;
  for (const Case& c : no_flush_cases()) {
    for (const int iterations : {1, 2, 5, 13, 29, 41, 60}) {
      const ScheduleSpec spec = spec_of(c, iterations);
      const StepLists lists(spec);
      const Schedule whole = make_schedule(spec);
      ASSERT_EQ(lists.iterations(), iterations) << label_of(c, iterations);
      pumped += lists.schedule().iterations < iterations;
      for (int w = 0; w < whole.workers; ++w) {
        const auto expected = whole_steps(whole, w, 0);
        ASSERT_EQ(expected.size(), size_t(iterations));
        for (int k = 0; k < iterations; ++k) {
          ASSERT_EQ(lists.step(w, k), expected[size_t(k)])
              << label_of(c, iterations) << " worker " << w << " step " << k;
          ++compared;
        }
      }
    }
  }
  EXPECT_GT(compared, 10000);
  EXPECT_GT(pumped, 40);  // the long runs were made from short lists, not generated whole
}

// A resumed run's first step is what cutting the whole list to the iterations >= step gave.
TEST(StepLists, ResumedStepIsTheCutOfTheWholeList) {
  for (const Case& c : no_flush_cases()) {
    const int iterations = 41;
    const StepLists lists(spec_of(c, iterations));
    const Schedule whole = make_schedule(spec_of(c, iterations));
    for (const int step : {1, 2, 3, 10, 11, 20, 39, 40}) {
      const Schedule cut = cut_to(whole, step);
      for (int w = 0; w < whole.workers; ++w) {
        EXPECT_EQ(lists.resumed_step(w, step), whole_steps(cut, w, step).at(size_t(step)))
            << label_of(c, iterations) << " resumed at " << step << " worker " << w;
      }
    }
  }
}

// Counting readers reader_span() steps ahead counts every reader of a version before the
// update that makes it: over the whole list, no reader lies further from its version's maker.
TEST(StepLists, NoReaderLiesBeyondTheSpan) {
  for (const Case& c : no_flush_cases()) {
    const int iterations = 41;
    const StepLists lists(spec_of(c, iterations));
    for (int w = 0; w < lists.schedule().workers; ++w) {
      std::map<std::pair<int, int>, int> made;
      for (int k = 0; k < iterations; ++k) {
        for (const Action& a : lists.step(w, k)) {
          if (a.kind == ActionKind::OptimizerStep) made[{a.chunk, a.version}] = k;
          if (!is_compute(a.kind)) continue;
          const auto maker = made.find({a.chunk, a.version});
          const int made_at = maker == made.end() ? 0 : maker->second;
          EXPECT_LE(k - made_at, lists.reader_span()) << label_of(c, iterations) << " worker " << w;
        }
      }
    }
  }
}

// The run: 2BW, 4 stages x 8 microbatches, 70,000 steps, once refused as 2.24 million
// compute actions. Its steps come from a short list; every microbatch is computed once per
// stage, and the last update makes version 70,000 (2BW: one per step).
TEST(StepLists, ALongNoFlushRunIsMadeFromAShortList) {
  ScheduleSpec spec;
  spec.name = "2bw", spec.stages = 4, spec.microbatches = 8, spec.iterations = 70000;
  EXPECT_THROW(make_schedule(spec), UserError);  // whole, it is still too many to simulate
  const StepLists lists(spec);
  size_t short_actions = 0;
  for (const auto& list : lists.schedule().actions) short_actions += list.size();
  EXPECT_LT(short_actions, 3000u);
  for (int w = 0; w < 4; ++w) {
    long long forwards = 0, backwards = 0;
    int last_version = -1;
    for (int k = 0; k < spec.iterations; ++k) {
      for (const Action& a : lists.step(w, k)) {
        forwards += a.kind == ActionKind::Forward;
        backwards += a.kind == ActionKind::Backward;
        if (a.kind == ActionKind::OptimizerStep) last_version = a.version;
      }
    }
    EXPECT_EQ(forwards, 8LL * 70000);
    EXPECT_EQ(backwards, 8LL * 70000);
    EXPECT_EQ(last_version, 70000);
  }
  EXPECT_EQ(lists.step(3, 69999).back().iteration, 69999);
  // With the recommended synchronous warm-up (5% of the run), both parts are pumped.
  spec.sync_iterations = 3500;
  const StepLists warmed(spec);
  EXPECT_LT(warmed.schedule().iterations, 40);
  EXPECT_EQ(warmed.step(0, 3499).front().version, 3499);  // a flushed group reads the latest
  EXPECT_EQ(warmed.step(0, 69999).back().version, 70000);
}

// A synchronous warm-up as long as the run or longer: every step flushes, as generated.
TEST(StepLists, AWarmUpLongerThanTheRunIsTheWholeRun) {
  for (const int iterations : {5, 12, 40}) {
    const Case c{"2bw", 3, 4, 1, iterations + 3};
    const StepLists lists(spec_of(c, iterations));
    const Schedule whole = make_schedule(spec_of(c, iterations));
    for (int w = 0; w < 3; ++w) {
      const auto expected = whole_steps(whole, w, 0);
      for (int k = 0; k < iterations; ++k) {
        ASSERT_EQ(lists.step(w, k), expected.at(size_t(k))) << label_of(c, iterations) << " step " << k;
      }
    }
  }
}

TEST(StepLists, AFlushScheduleRunsItsOneIterationEveryStep) {
  ScheduleSpec spec;
  spec.name = "1f1b", spec.stages = 3, spec.microbatches = 6;
  const StepLists lists(spec);
  const Schedule whole = make_schedule(spec);
  EXPECT_EQ(lists.iterations(), 1);
  for (int w = 0; w < 3; ++w) EXPECT_EQ(lists.step(w, 0), whole.actions.at(size_t(w)));
}

TEST(StepLists, RunsTooLongToNumberAreRefused) {
  ScheduleSpec spec;
  spec.name = "pipedream", spec.stages = 8, spec.microbatches = 64, spec.iterations = 2000000;
  EXPECT_THROW(StepLists{spec}, UserError);
}

}  // namespace
}  // namespace pipetrain::schedule
