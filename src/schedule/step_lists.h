#pragma once
// A run's action lists one training step at a time, without the whole run's list.
//
// A flush schedule's list is one iteration, the same at every step (iteration 0). A no-flush list
// spans the run (iterations = train.steps), but it is periodic between its irregular parts (the
// first steps, the end of a synchronous warm-up, the drain): a steady step is the one before it
// one iteration later, its iterations + 1 and the versions it reads and makes + the updates of an
// iteration. So the run's steps are built from a short list of a few iterations: its steps as they
// are, with a steady step "pumped" (repeated, shifted) until the run is long enough, once inside
// the warm-up and once after it. The lengths are checked when the lists are made: pumping one or
// two more times must give exactly the generated lists of those lengths, step by step, or the
// short list is doubled and checked again (a schedule found not periodic is generated whole).
//
// Memory and start-up time are those of the short list whatever train.steps is: a 70,000-step
// 2BW run of 4 stages x 8 microbatches holds ~500 actions, not 4 million.
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

class StepLists {
 public:
  // `run`: the whole run's spec (iterations = its steps for a no-flush schedule, 1 for a flush);
  // its refusals are make_schedule's.
  explicit StepLists(const ScheduleSpec& run);

  // The short list: name, workers, placement, policy. Its `actions` and `iterations` cover a
  // few iterations only: ask iterations() and step() for the run's.
  const Schedule& schedule() const { return short_; }
  int iterations() const { return iterations_; }  // of the run's list (1 for a flush schedule)
  int total_microbatches() const { return iterations_ * short_.microbatches; }

  // `worker`'s actions of step `step`, numbered as in the whole run's list.
  std::vector<Action> step(int worker, int step) const;
  // The first step of a run resumed at `step`: the actions of iterations >= step that earlier
  // steps ran ahead (run again from the checkpointed versions they read), then step `step`'s.
  std::vector<Action> resumed_step(int worker, int step) const;
  // At most this many steps lie between the step that makes a weight version (step 0 for the
  // initial weights) and the step of its last reader: counting readers that far ahead counts
  // every reader of a version before it is made or dropped.
  int reader_span() const { return reader_span_; }

 private:
  struct Pump {
    int step = 0;   // the short list's steady step that repeats
    int extra = 0;  // how many times more than once
  };
  // The short list's steps, pumped: what a run of short_.iterations + sum(extra) iterations does.
  StepLists(Schedule short_list, std::vector<Pump> pumps);
  static StepLists made_for(const ScheduleSpec& run);
  std::vector<std::vector<Action>> all_steps(int worker) const;
  bool reproduces(const ScheduleSpec& run) const;  // equal to the generated lists of `run`
  void measure_spans();

  Schedule short_;
  std::vector<std::vector<std::vector<Action>>> short_steps_;  // [worker][step]
  std::vector<Pump> pumps_;
  int iterations_ = 1;
  int versions_per_iteration_ = 1;
  int reader_span_ = 0;
  int run_ahead_ = 0;  // most iterations a step runs ahead of its own (no-flush run-ons)
};

}  // namespace pipetrain::schedule
