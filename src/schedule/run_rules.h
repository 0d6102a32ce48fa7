#pragma once
// What a run's config means for its schedule, by the catalogue (src/core sits below the
// catalogue and cannot ask it).
#include <string>

#include "core/config.h"

namespace pipetrain::schedule {

// The update rule a run follows: "sync" for one process or a flushing schedule, else its
// schedule's own rule ("2bw", "pipedream", ...) with its own weight versions. Checkpoints record it.
std::string policy_of(const Config& config);
// Why checkpoints of this rule cannot continue exactly ("" if they can: "sync", 2BW and
// 2bw-predict). Such runs write only the final checkpoint and --resume refuses them.
std::string resume_refusal(const std::string& policy);

}  // namespace pipetrain::schedule
