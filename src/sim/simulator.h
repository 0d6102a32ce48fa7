#pragma once
// Event-driven simulation of a Schedule under a cost model: the lists are replayed with blocking
// send/recv (both ends start when both are ready), so the timeline is that of the runtime.
#include <vector>

#include "schedule/replay.h"
#include "schedule/schedule.h"
#include "schedule/validate.h"
#include "sim/cost_model.h"

namespace pipetrain::sim {

struct SimResult {
  std::vector<std::vector<schedule::ActionTime>> times;  // [worker][position], ms
  double makespan_ms = 0;
  // Time per iteration. With 4 or more iterations it is measured over the middle ones (from
  // the end of iteration 0 to the end of iteration n-2): the steady state of no-flush
  // schedules, free of the first fill and the last drain. Otherwise makespan / iterations.
  double iteration_ms = 0;
  double window_start_ms = 0, window_end_ms = 0;
  double microbatches_per_s = 0;  // per pipeline replica
  double samples_per_s = 0;       // all dp_width replicas
  std::vector<double> busy_ms;          // per worker: compute + optimizer time in the window
  std::vector<double> bubble_fraction;  // per worker: idle share of the window
  std::vector<double> peak_activation_bytes;  // per worker
  // Per worker: activations plus the stages' gradient_bytes from each chunk's first Backward or
  // BackwardWeight of an iteration to the end of the worker's last OptimizerStep of it (the
  // runtime updates all its chunks there; a flush schedule's peak often
  // falls in its first backward, before the gradients exist), plus each compute action's
  // workspace_bytes while it runs, the sent gradients still held, and with dp_width > 1 the
  // replica sums' flat copies of the gradients.
  std::vector<double> peak_held_bytes;
  // Per worker: the same without the gradients (a no-flush worker holds them whole all along).
  std::vector<double> peak_transient_bytes;
  std::vector<double> peak_memory_bytes;      // activations + weight versions kept
  schedule::ScheduleStats stats;              // from the validator
};

// Validates first (UserError on an invalid schedule).
SimResult simulate(const schedule::Schedule& schedule, const CostModel& costs);

// Per action of `worker` (its list's order): the most bytes the simulator holds while it runs and
// what it holds at its end, as peak_held_bytes counts them (the planner's memory timeline).
struct HeldDuring {
  double peak = 0, at_end = 0;
};
std::vector<HeldDuring> held_during_actions(const schedule::Schedule& schedule, const CostModel& costs,
                                            int worker, const SimResult& result);

}  // namespace pipetrain::sim
