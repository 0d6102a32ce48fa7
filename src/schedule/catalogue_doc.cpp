// The catalogue as the table at the top of docs/schedules.md.
#include <fmt/format.h>

#include "core/text.h"
#include "schedule/catalogue.h"

namespace pipetrain::schedule {
namespace {

std::string weights_of(const ScheduleEntry& e) {
  switch (e.policy) {
    case WeightPolicyKind::Sync: return "sync";
    case WeightPolicyKind::DoubleBuffer: return e.rule + " (stashed, 2 versions)";
    case WeightPolicyKind::Stash: return e.rule + " (stashed)";
    case WeightPolicyKind::Predicted: return e.rule + " (predicted)";
  }
  return e.rule;
}

std::string parameters_of(const ScheduleEntry& e) {
  std::vector<std::string> out;
  if (e.parameters.v_shape) {
    out.push_back("v = 2 (V placement)");
  } else if (e.parameters.chunks) {
    out.push_back("v chunks");
  }
  if (e.parameters.microbatches_per_worker > 0)
    out.push_back(fmt::format("m >= {}p", e.parameters.microbatches_per_worker));
  if (e.parameters.chunked_microbatches_multiple_of_stages) out.push_back("m % p == 0 when v > 1");
  if (e.parameters.slices) out.push_back("token slices");
  if (e.policy == WeightPolicyKind::DoubleBuffer) out.push_back("m >= p");
  return out.empty() ? "" : join(out, "; ");
}

std::string runtime_of(const ScheduleEntry& e) {
  if (!e.runtime.runs) return "no (simulator only)";
  std::vector<std::string> without;
  if (!e.runtime.data_parallel) without.push_back("data parallelism");
  if (e.runtime.data_parallel && !e.runtime.zero1) without.push_back("ZeRO-1");
  if (!e.runtime.recompute) without.push_back("recomputation");
  return without.empty() ? "yes" : "yes, without " + join(without, " or ");
}

std::string planner_of(const ScheduleEntry& e) {
  if (!e.planner.plans) return "no";
  if (e.planner.chunks > 1) return fmt::format("yes, v = {}", e.planner.chunks);
  return e.planner.one_stage ? "yes, also d = 1" : "yes";
}

const char* yes_no(bool value) { return value ? "yes" : "no"; }

}  // namespace

std::string catalogue_markdown() {
  std::string out =
      "| schedule | weights | updates | flushes | resumes | parameters | runs on workers | "
      "planned |\n|---|---|---|---|---|---|---|---|\n";
  for (const auto& e : schedule_catalogue()) {
    out += fmt::format("| [{}](#{}) | {} | {} | {} | {} | {} | {} | {} |\n", e.name, e.name,
                       weights_of(e), e.updates_per_microbatch() ? "per microbatch" : "per iteration",
                       yes_no(e.flushes()), yes_no(e.resumes), parameters_of(e), runtime_of(e),
                       planner_of(e));
  }
  return out;
}

}  // namespace pipetrain::schedule
