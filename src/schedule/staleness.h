#pragma once
// Staleness of predicted-weight schedules, derived from the schedule itself (not typed in).
#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Fills policy.forward_staleness / backward_staleness per pipeline stage, as the maximum over
// microbatches of:
//   backward: with policy.predict_backward (SpecTrain), the number of later updates landing on
//     the stage between the end of the microbatch's backward there and the end of its backward on
//     stage 0, timed with one slot per forward and per backward (SpecTrain's model); else 0.
//   forward: the updates landing on the stage between the microbatch's forward and its
//     backward (backward version - forward version), plus the backward staleness.
// PipeOptim comes out as D - r - 1; SpecTrain as floor(r/2) + D - r - 1 and floor(r/2).
void derive_staleness(Schedule& schedule);

}  // namespace pipetrain::schedule
