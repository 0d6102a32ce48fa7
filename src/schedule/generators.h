#pragma once
// Schedule generators: pure functions from a ScheduleSpec to a Schedule. They check nothing:
// make_schedule checks the parameters by the schedule's catalogue entry first, and bad ones are
// UserError (they come from the command line or a config).
#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Names accepted by make_schedule (and `pipetrain simulate --schedule`): the catalogue's.
const std::vector<std::string>& schedule_names();
Schedule make_schedule(const ScheduleSpec& spec);  // by the catalogue entry of spec.name

// Synchronous (flush every iteration, one weight version).
Schedule make_gpipe_schedule(const ScheduleSpec& spec);        // slices >= 1 (TeraPipe-style)
Schedule make_1f1b_flush_schedule(const ScheduleSpec& spec);   // PipeDream-Flush
Schedule make_interleaved_schedule(const ScheduleSpec& spec);  // Megatron, v chunks, m % p == 0
Schedule make_looped_bfs_schedule(const ScheduleSpec& spec);   // looping placement, breadth-first
Schedule make_zb_h1_schedule(const ScheduleSpec& spec);        // split backward, 1F1B memory
Schedule make_zb_h2_schedule(const ScheduleSpec& spec);        // split backward, 2p-1 in flight
// Two chunks per worker in a V (Placement::V): std::invalid_argument unless spec.chunks == 2.
Schedule make_zb_v_schedule(const ScheduleSpec& spec);         // zero-bubble ZB-V, 1F1B memory
Schedule make_dualpipev_schedule(const ScheduleSpec& spec);    // F&B pairs, m >= 2p

// 1F1B without flush across all iterations (one fill, one drain).
Schedule make_2bw_schedule(const ScheduleSpec& spec);          // m >= p, 2 versions
Schedule make_pipedream_schedule(const ScheduleSpec& spec);    // stash, update per microbatch
Schedule make_pipeoptim_schedule(const ScheduleSpec& spec);    // predicted forward weights
Schedule make_spectrain_schedule(const ScheduleSpec& spec);    // predicted forward + backward
Schedule make_2bw_predict_schedule(const ScheduleSpec& spec);  // 2BW, versions predicted 1 ahead
// PipeDream without weight stashing (negative control): forward reads the weights of its
// moment, backward the (newer) weights of its own moment; no prediction.
Schedule make_pipedream_nostash_schedule(const ScheduleSpec& spec);

// The no-flush 1F1B with any policy: lets tests build schedules the catalogue refuses (2BW with m < p) to show that the validator rejects them too.
Schedule make_async_1f1b_schedule(const ScheduleSpec& spec, WeightPolicyKind policy);

}  // namespace pipetrain::schedule
