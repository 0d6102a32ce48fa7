#pragma once
// What a run's config means for its schedule, by the catalogue (src/core sits below the
// catalogue and cannot ask it).
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace pipetrain::schedule {

// The update rule a run follows: "sync" for one process or a flushing schedule, else its
// schedule's own rule ("2bw", "pipedream", ...) with its own weight versions. Checkpoints record it.
std::string policy_of(const Config& config);
// Why checkpoints of this rule cannot continue exactly ("" if they can: every catalogue rule
// does). Such runs would write only the final checkpoint and --resume would refuse them.
std::string resume_refusal(const std::string& policy);

// The weight versions besides the latest that a checkpoint after `step` steps holds for pipeline
// stage `stage`, newest first (by the catalogue's closed forms): a checkpoint is the cut
// "iterations < step done", and the actions of later iterations that ran before it (forwards
// ahead of their step) run again on resume from the weights they read then. A version counts
// updates (per microbatch for PipeDream's family). After the final step it is what the next
// step would read, kept (predicting policies: predicted) to the end of the run by the weight
// policies, so a final checkpoint continues to more steps.
std::vector<int> checkpointed_versions(const Config& config, int stage, int64_t step);

// One line suggesting the schedule's recommended recipe when the run uses another ("" if it
// follows it or the schedule has none).
std::string training_advice(const Config& config);

}  // namespace pipetrain::schedule
