#include "schedule/schedule.h"

#include <array>

namespace pipetrain::schedule {
namespace {
constexpr std::array<std::pair<WeightPolicyKind, std::string_view>, 4> kPolicies{{
    {WeightPolicyKind::Sync, "sync"},
    {WeightPolicyKind::DoubleBuffer, "double_buffer"},
    {WeightPolicyKind::Stash, "stash"},
    {WeightPolicyKind::Predicted, "predicted"},
}};
}  // namespace

std::string_view policy_name(WeightPolicyKind kind) {
  for (const auto& [k, name] : kPolicies)
    if (k == kind) return name;
  return "?";
}

bool parse_policy(std::string_view name, WeightPolicyKind* kind) {
  for (const auto& [k, n] : kPolicies) {
    if (n == name) {
      *kind = k;
      return true;
    }
  }
  return false;
}

}  // namespace pipetrain::schedule
