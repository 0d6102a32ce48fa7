#pragma once
// The validator: checks that a Schedule can run as written and follows its weight policy.
//   - structure: sizes, field ranges, every send addressed to the worker of the adjacent stage;
//   - transfers: FIFO matching of sends and recvs per worker pair, same payload on both ends;
//   - dependencies, per worker in order: a forward after its input (earlier forward of the
//     previous stage here, or its RecvActivation), a backward after its forward and its output
//     gradient, slices in order (backward in reverse), weight-gradient after input-gradient,
//     updates after all gradients of their group; every (stage, microbatch, slice) computed once;
//   - blocking send/recv: replays the lists with rendezvous semantics; a stall is a deadlock;
//   - versions: sync reads the latest; 2BW group g reads max(0, g-1), m >= d, <= 2 live;
//     stash: the backward reads the forward's version; nothing reads a version not yet produced.
// The first problem becomes a message that names worker, position and action, then the grid.
#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

struct ScheduleStats {
  // Per worker: most (chunk, microbatch, slice) units between their forward and the end of their
  // backward (activations held), and most weight versions of one chunk kept at once.
  std::vector<int> peak_inflight;
  std::vector<int> peak_live_versions;
};

struct Validation {
  bool ok = false;
  std::string error;  // empty when ok
  ScheduleStats stats;
};

Validation validate(const Schedule& schedule);
// Throws UserError with the message when the schedule is invalid.
ScheduleStats validate_or_throw(const Schedule& schedule);

}  // namespace pipetrain::schedule
