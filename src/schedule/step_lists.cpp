#include "schedule/step_lists.h"

#include <algorithm>
#include <climits>
#include <map>
#include <utility>

#include "core/error.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/steps.h"

namespace pipetrain::schedule {
namespace {

// A synchronous warm-up longer than this is pumped at its middle step.
constexpr int kShortSyncSteps = 6;
// Doublings of the short list's steady part before a schedule counts as not periodic.
constexpr int kTries = 4;

ScheduleSpec shortened(const ScheduleSpec& run, int sync_steps, int steady_steps) {
  ScheduleSpec spec = run;
  spec.sync_iterations = sync_steps;
  spec.iterations = sync_steps + steady_steps;
  return spec;
}

std::vector<Action> shifted(const std::vector<Action>& actions, int iterations, int versions) {
  std::vector<Action> out = actions;
  for (Action& a : out) {
    a.iteration += iterations;
    if (a.version >= 0) a.version += versions;
  }
  return out;
}

// Ids that grow over a run (versions, microbatches, message tags) stay within an int.
void check_run_fits(const ScheduleSpec& run) {
  const long long units = 1LL * run.iterations * run.microbatches * run.slices * run.stages * run.chunks;
  if (units > INT_MAX / 4) {
    throw UserError(fmt::format("schedule {}: {} iterations x {} microbatches x {} slices x {} stages "
                                "is more units of work than one run counts (at most {})",
                                run.name, run.iterations, run.microbatches, run.slices,
                                run.stages * run.chunks, INT_MAX / 4));
  }
}

}  // namespace

StepLists::StepLists(Schedule short_list, std::vector<Pump> pumps)
    : short_(std::move(short_list)), pumps_(std::move(pumps)) {
  iterations_ = short_.iterations;
  for (const Pump& pump : pumps_) iterations_ += pump.extra;
  versions_per_iteration_ = updates_per_microbatch(short_.policy.kind) ? short_.microbatches : 1;
  const auto bounds = step_bounds(short_, 0);
  for (int w = 0; w < short_.workers; ++w) {
    const auto& list = short_.actions.at(size_t(w));
    auto& steps = short_steps_.emplace_back();
    for (const auto& [begin, end] : bounds.at(size_t(w))) {
      steps.emplace_back(list.begin() + long(begin), list.begin() + long(end));
    }
  }
  measure_spans();
}

StepLists::StepLists(const ScheduleSpec& run) : StepLists(made_for(run)) {}

StepLists StepLists::made_for(const ScheduleSpec& run) {
  const ScheduleEntry& entry = schedule_entry(run.name);
  if (const std::string refusal = entry.check(run); !refusal.empty()) throw UserError(refusal);
  check_run_fits(run);
  if (entry.flushes()) return StepLists(make_schedule(run), {});  // one iteration, every step
  const int sync = std::min(run.sync_iterations, run.iterations);
  const int steady = run.iterations - sync;
  const int short_sync = std::min(sync, kShortSyncSteps);
  const int stages = run.stages * run.chunks;
  int short_steady = 2 * ((stages + run.microbatches - 1) / run.microbatches + 3);
  for (int attempt = 0; attempt < kTries; ++attempt, short_steady *= 2) {
    if (short_steady >= steady && short_sync == sync) break;
    std::vector<Pump> pumps;
    const int steady_here = std::min(short_steady, steady);
    if (sync > short_sync) pumps.push_back({short_sync / 2, 0});
    if (steady > steady_here) pumps.push_back({short_sync + steady_here / 2, 0});
    const Schedule short_list = make_schedule(shortened(run, short_sync, steady_here));
    // Pumped once and twice (each pump alone, then together), the short list must be what the
    // generator makes of those lengths.
    const auto pumped = [&](int extra_sync, int extra_steady) {
      std::vector<Pump> trial = pumps;
      for (Pump& pump : trial) pump.extra = pump.step < short_sync ? extra_sync : extra_steady;
      return StepLists(short_list, trial);
    };
    const bool sync_pumped = sync > short_sync, steady_pumped = steady > steady_here;
    bool periodic = true;
    constexpr std::pair<int, int> kTrials[] = {{1, 0}, {2, 0}, {0, 1}, {0, 2}, {1, 1}};
    for (const auto& [extra_sync, extra_steady] : kTrials) {
      if ((extra_sync > 0 && !sync_pumped) || (extra_steady > 0 && !steady_pumped)) continue;
      const int s = short_sync + (sync_pumped ? extra_sync : 0);
      const int t = steady_here + (steady_pumped ? extra_steady : 0);
      periodic = periodic && pumped(extra_sync, extra_steady).reproduces(shortened(run, s, t));
    }
    if (periodic) return pumped(sync - short_sync, steady - steady_here);
  }
  return StepLists(make_schedule(shortened(run, sync, steady)), {});  // whole (within its cap)
}

std::vector<Action> StepLists::step(int worker, int k) const {
  const auto& steps = short_steps_.at(size_t(worker));
  int shift = 0;  // iterations of the pumped repeats before step k
  for (const Pump& pump : pumps_) {
    const int j = k - shift;
    if (j < pump.step) break;
    if (j <= pump.step + pump.extra) {
      const int d = shift + j - pump.step;
      return shifted(steps.at(size_t(pump.step)), d, d * versions_per_iteration_);
    }
    shift += pump.extra;
  }
  return shifted(steps.at(size_t(k - shift)), shift, shift * versions_per_iteration_);
}

std::vector<Action> StepLists::resumed_step(int worker, int k) const {
  std::vector<Action> actions;
  for (int j = std::max(0, k - run_ahead_); j < k; ++j) {
    for (const Action& a : step(worker, j)) {
      if (a.iteration >= k) actions.push_back(a);
    }
  }
  const auto own = step(worker, k);
  actions.insert(actions.end(), own.begin(), own.end());
  return actions;
}

std::vector<std::vector<Action>> StepLists::all_steps(int worker) const {
  std::vector<std::vector<Action>> steps;
  for (int k = 0; k < iterations_; ++k) steps.push_back(step(worker, k));
  return steps;
}

bool StepLists::reproduces(const ScheduleSpec& run) const {
  const Schedule whole = make_schedule(run);
  if (whole.iterations != iterations_) return false;
  const auto whole_bounds = step_bounds(whole, 0);
  for (int w = 0; w < whole.workers; ++w) {
    const auto& list = whole.actions.at(size_t(w));
    const auto& bounds = whole_bounds.at(size_t(w));
    const auto steps = all_steps(w);
    for (size_t k = 0; k < bounds.size(); ++k) {
      const auto [begin, end] = bounds[k];
      if (!std::equal(list.begin() + long(begin), list.begin() + long(end), steps.at(k).begin(),
                      steps.at(k).end())) {
        return false;
      }
    }
  }
  return true;
}

// Over the short list (a pumped step repeats a step of it): how far a step runs ahead of its own
// iteration, and how many steps after the one that makes a version its last reader runs.
void StepLists::measure_spans() {
  run_ahead_ = 0, reader_span_ = 0;
  for (const auto& steps : short_steps_) {
    std::map<std::pair<int, int>, int> made, last_read;  // (chunk, version) -> step
    for (int k = 0; k < int(steps.size()); ++k) {
      for (const Action& a : steps[size_t(k)]) {
        run_ahead_ = std::max(run_ahead_, a.iteration - k);
        if (a.kind == ActionKind::OptimizerStep) made[{a.chunk, a.version}] = k;
        if (is_compute(a.kind)) last_read[{a.chunk, a.version}] = k;
      }
    }
    for (const auto& [version, step] : last_read) {
      const auto producer = made.find(version);
      reader_span_ = std::max(reader_span_, step - (producer == made.end() ? 0 : producer->second));
    }
  }
}

}  // namespace pipetrain::schedule
