#include "schedule/run_rules.h"

#include <algorithm>
#include <cmath>

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
    return fmt::format("schedule '{}' keeps no checkpoint it could continue from exactly", policy);
  }
  return fmt::format("weight policy '{}' is not in the schedule catalogue", policy);
}

std::vector<int> checkpointed_versions(const Config& config, int stage, int64_t step) {
  const ScheduleEntry& entry = schedule_entry(config.pipeline.schedule);
  const bool double_buffer = entry.policy == WeightPolicyKind::DoubleBuffer;
  // After the last step too: the cut as if more steps followed, so a final checkpoint continues.
  if (entry.flushes() || step == 0) return {};
  const int p = int(config.pipeline.stages * config.pipeline.chunks);
  const int m = int(config.train.microbatches);
  const int64_t updates = entry.updates_per_microbatch() ? step * m : step;
  // Held: what an action of a later iteration reads from before the cut, and 2bw-predict's
  // extrapolated copy of the latest version (a copy, not the masters themselves).
  const auto held = [&](Reads reads) {
    return reads.version < updates || (double_buffer && reads.predict > 0 && reads.version == updates);
  };
  std::vector<int> versions;
  for (int64_t j = step * m;; ++j) {  // versions grow with the microbatch: stop past the cut
    bool any_before_cut = false;
    for (const ReadsRule rule : {entry.reference.forward, entry.reference.backward}) {
      const Reads reads = reads_at(rule, stage, j, p, m, int(config.pipeline.sync_warmup_steps));
      any_before_cut = any_before_cut || reads.version <= updates;
      if (held(reads) && std::find(versions.begin(), versions.end(), reads.version) == versions.end()) {
        versions.push_back(reads.version);
      }
    }
    if (!any_before_cut) break;
  }
  std::sort(versions.rbegin(), versions.rend());
  return versions;
}

std::string training_advice(const Config& config) {
  const ScheduleEntry* entry = find_schedule(config.pipeline.schedule);
  if (entry == nullptr || entry->recommended.optimizer.empty()) return "";
  const auto& recipe = entry->recommended;
  const bool warmed_up = recipe.sync_warmup_fraction == 0 || config.pipeline.sync_warmup_steps > 0;
  if (config.train.optimizer == recipe.optimizer &&
      config.train.delay_correction == recipe.delay_correction && warmed_up) {
    return "";
  }
  std::string flags = fmt::format("--train.optimizer {} --train.delay_correction {}", recipe.optimizer,
                                  recipe.delay_correction);
  std::string why = recipe.evidence;
  if (recipe.sync_warmup_fraction > 0) {
    const double fraction = recipe.sync_warmup_fraction;
    flags += fmt::format(" --pipeline.sync_warmup_steps {}",
                         std::max<int64_t>(1, std::llround(fraction * double(config.train.steps))));
    why = fmt::format("{:g}% of train.steps; {}", 100 * fraction, why);
  }
  return fmt::format("pipetrain: note: schedule {} trains best with {} ({}; docs/weight-policies.md)",
                     entry->name, flags, why);
}

}  // namespace pipetrain::schedule
