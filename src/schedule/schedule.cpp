#include "schedule/schedule.h"

#include <algorithm>
#include <array>

namespace pipetrain::schedule {
namespace {
constexpr std::array<std::pair<WeightPolicyKind, std::string_view>, 4> kPolicies{{
    {WeightPolicyKind::Sync, "sync"},
    {WeightPolicyKind::DoubleBuffer, "double_buffer"},
    {WeightPolicyKind::Stash, "stash"},
    {WeightPolicyKind::Predicted, "predicted"},
}};
constexpr std::array<std::pair<Placement, std::string_view>, 2> kPlacements{{
    {Placement::Looping, "looping"},
    {Placement::V, "v"},
}};

template <typename Enum, size_t N>
std::string_view name_in(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum value) {
  for (const auto& [v, name] : names)
    if (v == value) return name;
  return "?";
}

template <typename Enum, size_t N>
bool parse_in(const std::array<std::pair<Enum, std::string_view>, N>& names, std::string_view name,
              Enum* value) {
  for (const auto& [v, n] : names) {
    if (n == name) {
      *value = v;
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view policy_name(WeightPolicyKind kind) { return name_in(kPolicies, kind); }
bool parse_policy(std::string_view name, WeightPolicyKind* kind) { return parse_in(kPolicies, name, kind); }
std::string_view placement_name(Placement placement) { return name_in(kPlacements, placement); }
bool parse_placement(std::string_view name, Placement* placement) {
  return parse_in(kPlacements, name, placement);
}

int most_in_flight(const std::vector<Action>& actions, int chunk) {
  int held = 0, most = 0;
  for (const auto& action : actions) {
    if (action.chunk != chunk || action.slice != 0) continue;
    if (action.kind == ActionKind::Forward) most = std::max(most, ++held);
    if (is_gradient_producer(action.kind)) --held;
  }
  return most;
}

bool splits_backward(const std::vector<Action>& actions, int chunk) {
  return std::any_of(actions.begin(), actions.end(), [&](const Action& action) {
    return action.chunk == chunk && action.kind == ActionKind::BackwardInput;
  });
}

}  // namespace pipetrain::schedule
