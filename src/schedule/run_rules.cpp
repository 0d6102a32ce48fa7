#include "schedule/run_rules.h"

#include <fmt/format.h>

#include "schedule/catalogue.h"

namespace pipetrain::schedule {

std::string policy_of(const Config& config) {
  // Also on one stage: 2BW still delays gradients by a step, PipeDream updates per microbatch.
  return schedule_entry(config.pipeline.schedule).rule;
}

std::string resume_refusal(const std::string& policy) {
  for (const auto& entry : schedule_catalogue()) {
    if (entry.rule != policy) continue;
    if (entry.resumes) return "";
    // A checkpoint at step k restarts iteration k; 2BW's group k reads a fixed saved version,
    // but these policies' early forwards read the latest weights of their moment.
    if (entry.updates_per_microbatch()) {
      return fmt::format("schedule '{}' updates after every microbatch, and the microbatches in "
                         "flight at a step boundary read weights that no checkpoint holds", policy);
    }
    return fmt::format("schedule '{}' keeps no checkpoint it could continue from exactly", policy);
  }
  return fmt::format("weight policy '{}' is not in the schedule catalogue", policy);
}

}  // namespace pipetrain::schedule
