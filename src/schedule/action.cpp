#include "schedule/action.h"

#include <array>

namespace pipetrain::schedule {
namespace {

struct KindNames {
  ActionKind kind;
  std::string_view name;
  std::string_view token;
};

constexpr std::array<KindNames, kActionKindCount> kKinds{{
    {ActionKind::Forward, "Forward", "F"},
    {ActionKind::Backward, "Backward", "B"},
    {ActionKind::BackwardInput, "BackwardInput", "I"},
    {ActionKind::BackwardWeight, "BackwardWeight", "W"},
    {ActionKind::SendActivation, "SendActivation", "SA"},
    {ActionKind::RecvActivation, "RecvActivation", "RA"},
    {ActionKind::SendGrad, "SendGrad", "SG"},
    {ActionKind::RecvGrad, "RecvGrad", "RG"},
    {ActionKind::AllReduceGrads, "AllReduceGrads", "AR"},
    {ActionKind::OptimizerStep, "OptimizerStep", "OPT"},
}};

}  // namespace

std::string_view kind_name(ActionKind kind) { return kKinds[static_cast<int>(kind)].name; }
std::string_view kind_token(ActionKind kind) { return kKinds[static_cast<int>(kind)].token; }

bool parse_kind(std::string_view name, ActionKind* kind) {
  for (const auto& entry : kKinds) {
    if (entry.name == name || entry.token == name) {
      *kind = entry.kind;
      return true;
    }
  }
  return false;
}

bool is_compute(ActionKind kind) {
  return kind == ActionKind::Forward || kind == ActionKind::Backward ||
         kind == ActionKind::BackwardInput || kind == ActionKind::BackwardWeight;
}
bool is_send(ActionKind kind) {
  return kind == ActionKind::SendActivation || kind == ActionKind::SendGrad;
}
bool is_recv(ActionKind kind) {
  return kind == ActionKind::RecvActivation || kind == ActionKind::RecvGrad;
}
bool is_comm(ActionKind kind) { return is_send(kind) || is_recv(kind); }
bool is_gradient_producer(ActionKind kind) {
  return kind == ActionKind::Backward || kind == ActionKind::BackwardWeight;
}

bool Action::operator==(const Action& o) const {
  return kind == o.kind && iteration == o.iteration && microbatch == o.microbatch &&
         slice == o.slice && chunk == o.chunk && version == o.version && peer == o.peer;
}

}  // namespace pipetrain::schedule
