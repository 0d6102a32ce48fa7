#pragma once
// Turns per-worker compute orders into a complete Schedule: inserts optimizer steps and
// gradient all-reduces, assigns weight versions by policy, and places every send/recv pair.
//
// Why the placement is deadlock-free with blocking send/recv: the compute actions are timed
// as-soon-as-possible with nominal costs, and every transfer becomes one event at the moment its
// producer finishes. Events are appended to both workers' lists in one global order, so any two
// workers meet their common transfers in the same order; executing the events in that order is
// always possible, whatever the real costs turn out to be.
#include <functional>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct ComputeItem {
  ActionKind kind;  // Forward, Backward, BackwardInput or BackwardWeight
  int iteration;
  int microbatch;
  int slice;
  int chunk;
};
using ComputeOrder = std::vector<std::vector<ComputeItem>>;  // [worker][position]

// `header` carries the metadata (name, sizes, policy kind); its action lists are replaced. The
// model's first stage hands no input gradient back, so a split backward there (zero-bubble's B
// and W) becomes one whole Backward at B's place: a W left behind would do all the work (B has
// nothing to compute) and, behind the next gradient's receive, wait for it
// (tests/sim/zero_bubble_test.cpp).
Schedule lower_schedule(Schedule header, const ComputeOrder& order, const ScheduleSpec& spec);

struct Timed {
  double start = 0, end = 0;
};
using DurationOf = std::function<double(const Action&)>;

// Start and end of every action when each action waits only for its worker and for the data it
// consumes (forward of the previous stage, input gradient of the next); send/recv actions are
// instant and their order is ignored. Used to order transfers and to derive staleness.
std::vector<std::vector<Timed>> dataflow_times(const Schedule& s, const DurationOf& duration_of);

// Nominal duration of a compute item: the spec's relative costs, split evenly over slices.
double nominal_duration(const ScheduleSpec& spec, ActionKind kind, int slices);

}  // namespace pipetrain::schedule
