#pragma once
// Where each worker's training steps begin and end in its action list. Step k ends after the
// worker's last update of iteration k (a flush schedule's one-iteration list is one step, run
// again at every step). Between two steps every worker meets the others (stop votes, metrics,
// checkpoints), so no action of step k may wait for a peer's action of a later step.
//
// No-flush schedules overlap each update with work: step k runs on into iteration k+1's actions
// until the first that needs the update done (a reader of the version it produces, or the next
// update) or the receive that feeds it, so the update's reductions are posted at its
// OptimizerStep and waited for only there. (After a synchronous warm-up step, the run-on is
// empty: every action of the next iteration reads the new version.)
// A run-on never waits for a peer's later step: a receive in it whose send lies in the peer's
// next step (PipeDream's drain, where no forward stops the run-on before the last backwards) ends
// the run-on there, and so on until no such receive is left (StepBounds.NoStepWaitsForAPeersLaterStep
// checks this for every catalogue schedule, with fewer microbatches than stages too).
#include <cstddef>
#include <utility>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

using StepBounds = std::vector<std::pair<size_t, size_t>>;  // per step: [begin, end) of actions

// The bounds of every worker's steps first_step.. (earlier steps are empty); the lists are the
// schedule's, already cut to the iterations >= first_step on a resume.
std::vector<StepBounds> step_bounds(const Schedule& schedule, int first_step);
// The same, of one worker.
StepBounds step_bounds(const Schedule& schedule, int worker, int first_step);

// Whether `action` may run only after the update that produces `produced_version` is done.
bool needs_update_done(const Action& action, int produced_version);

// Whether the schedule's workers post their replica all-reduce (AllReduceGrads) and wait for it
// only at the update's first reader: no-flush schedules. A flush waits for it at once.
bool posts_replica_sums(const Schedule& schedule);

}  // namespace pipetrain::schedule
