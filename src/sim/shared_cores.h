#pragma once
// Workers that outnumber the cores they run on take turns (processor sharing): while n workers
// compute on c cores, each advances at min(1, c / n) of its own speed. This machine runs 5
// workers on 2 cores when a memory budget asks for them.
#include "schedule/replay.h"
#include "sim/cost_model.h"

namespace pipetrain::sim {

// The Eager replay of `schedule` under `costs` with its compute stretched by the sharing of
// costs.shared_cores cores among all workers of all dp_width replicas. The stretch of each
// action is found by fixed-point iteration: replay, measure how many workers compute during
// each action, recompute its duration from that, until the timeline stops moving.
schedule::ReplayResult replay_on_shared_cores(const schedule::Schedule& schedule,
                                              const schedule::TransferMatch& match,
                                              const CostModel& costs,
                                              const schedule::ReplayOptions& options);

}  // namespace pipetrain::sim
