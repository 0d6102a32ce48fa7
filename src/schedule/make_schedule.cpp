// Questions to the catalogue: lookups, parameter checks, and make_schedule itself.
#include "core/error.h"
#include "core/text.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"

namespace pipetrain::schedule {
namespace {

std::string names_joined(const std::function<bool(const ScheduleEntry&)>& keep,
                         const std::string& separator) {
  return join(schedule_names_where(keep), separator);
}

// Checks every generator shares: sizes that make no sense.
std::string check_common(const ScheduleSpec& spec, const std::string& name) {
  if (spec.stages < 1) return fmt::format("schedule {}: stages must be >= 1 (got {})", name, spec.stages);
  if (spec.microbatches < 1)
    return fmt::format("schedule {}: microbatches must be >= 1 (got {})", name, spec.microbatches);
  if (spec.iterations < 1)
    return fmt::format("schedule {}: iterations must be >= 1 (got {})", name, spec.iterations);
  if (spec.dp_width < 1)
    return fmt::format("schedule {}: dp-width must be >= 1 (got {})", name, spec.dp_width);
  if (spec.chunks < 1) return fmt::format("schedule {}: chunks must be >= 1 (got {})", name, spec.chunks);
  if (spec.slices < 1) return fmt::format("schedule {}: slices must be >= 1 (got {})", name, spec.slices);
  if (spec.sync_iterations < 0) {
    return fmt::format("schedule {}: sync warm-up steps must be >= 0 (got {})", name, spec.sync_iterations);
  }
  return "";
}

}  // namespace

bool flushes(WeightPolicyKind kind) { return kind == WeightPolicyKind::Sync; }

bool updates_per_microbatch(WeightPolicyKind kind) {
  return kind == WeightPolicyKind::Stash || kind == WeightPolicyKind::Predicted;
}

bool stashes_versions(WeightPolicyKind kind) {
  return kind == WeightPolicyKind::DoubleBuffer || kind == WeightPolicyKind::Stash;
}

std::string ScheduleEntry::sync_warmup_refusal(int64_t sync_steps) const {
  if (sync_steps <= 0 || parameters.sync_warmup) return "";
  return fmt::format("schedule {}: a synchronous warm-up (pipeline.sync_warmup_steps = {}) is only "
                     "supported by {}", name, sync_steps,
                     names_joined([](const auto& e) { return e.parameters.sync_warmup; }, ", "));
}

int ScheduleEntry::weight_versions(int stages) const {
  switch (policy) {
    case WeightPolicyKind::Sync: return 1;
    case WeightPolicyKind::DoubleBuffer: return 2;
    case WeightPolicyKind::Stash: return stages;  // stage 0 stashes one per microbatch in flight
    case WeightPolicyKind::Predicted: return 2;   // the latest and the prediction
  }
  return 1;
}

std::string ScheduleEntry::check(const ScheduleSpec& spec) const {
  if (auto common = check_common(spec, name); !common.empty()) return common;
  if (spec.chunks > 1 && !parameters.chunks) {
    return fmt::format("schedule {}: takes one chunk per worker (got --chunks {}); use {}", name,
                       spec.chunks, names_joined([](const auto& e) { return e.parameters.chunks; }, " or "));
  }
  if (spec.slices > 1 && !parameters.slices) {
    return fmt::format("schedule {}: token slices are only supported by {} (got --slices {})", name,
                       names_joined([](const auto& e) { return e.parameters.slices; }, ", "),
                       spec.slices);
  }
  if (auto warmup = sync_warmup_refusal(spec.sync_iterations); !warmup.empty()) return warmup;
  if (parameters.v_shape && spec.chunks != 2) {
    return fmt::format("schedule {}: places exactly 2 chunks per worker in a V (--chunks 2, got {})",
                       name, spec.chunks);
  }
  if (spec.microbatches < parameters.microbatches_per_worker * spec.stages) {
    return fmt::format("schedule {}: needs microbatches >= {} x stages; got m={} p={}", name,
                       parameters.microbatches_per_worker, spec.microbatches, spec.stages);
  }
  if (parameters.chunked_microbatches_multiple_of_stages && spec.chunks > 1 &&
      spec.microbatches % spec.stages != 0) {
    return fmt::format("schedule {}: microbatches ({}) must be a multiple of stages ({})", name,
                       spec.microbatches, spec.stages);
  }
  // With m < d the version made after group g would be needed by group g+2 before group g's
  // backwards are done: a third version, or a stall. The paper requires m >= d.
  if (policy == WeightPolicyKind::DoubleBuffer && spec.microbatches < spec.stages) {
    return fmt::format("schedule {}: needs microbatches >= stages (m >= d) for 2 weight versions; "
                       "got m={} d={}", name, spec.microbatches, spec.stages);
  }
  return "";
}

const ScheduleEntry* find_schedule(const std::string& name) {
  for (const auto& entry : schedule_catalogue()) {
    if (entry.name == name) return &entry;
  }
  return nullptr;
}

const ScheduleEntry& schedule_entry(const std::string& name) {
  const ScheduleEntry* entry = find_schedule(name);
  if (entry == nullptr) fail("unknown schedule '{}' (known: {})", name, join(schedule_names(), ", "));
  return *entry;
}

std::vector<std::string> schedule_names_where(const std::function<bool(const ScheduleEntry&)>& keep) {
  std::vector<std::string> names;
  for (const auto& entry : schedule_catalogue()) {
    if (keep(entry)) names.push_back(entry.name);
  }
  return names;
}

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = schedule_names_where([](const auto&) { return true; });
  return names;
}

const ScheduleEntry& runtime_schedule(const std::string& name, const std::string& origin) {
  const std::string runs = names_joined([](const auto& e) { return e.runtime.runs; }, ", ");
  const std::string prefix = origin.empty() ? "" : origin + ": ";
  const ScheduleEntry* entry = find_schedule(name);
  if (entry == nullptr) fail("{}pipeline.schedule must be one of {}, got '{}'", prefix, runs, name);
  if (!entry->runtime.runs) {
    fail("{}pipeline.schedule '{}' runs in the simulator only (pipetrain simulate); the runtime "
         "runs {}", prefix, name, runs);
  }
  return *entry;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  const ScheduleEntry& entry = schedule_entry(spec.name);
  const std::string refusal = entry.check(spec);
  if (!refusal.empty()) throw UserError(refusal);
  // Keeps whole lists sane: they are simulated and drawn. (A run's lists are made step by step,
  // schedule::StepLists, of any length.)
  const long long actions = 1LL * spec.stages * spec.chunks * spec.microbatches * spec.slices *
                            spec.iterations;
  if (actions > 2'000'000) {
    throw UserError(fmt::format("schedule {}: {} compute actions is too many to simulate", spec.name,
                                actions));
  }
  return entry.generate(spec);
}

}  // namespace pipetrain::schedule
