#include "schedule/send_release.h"

#include <map>
#include <tuple>

namespace pipetrain::schedule {
namespace {

std::tuple<bool, int, int, int> order_of(const Message& m) {
  return {m.gradient, m.to_stage, m.microbatch, m.slice};
}

// Each message `peer` sends to `worker` in its list, with the last message of `worker`'s that
// `peer` had taken before sending it.
std::map<Message, std::optional<Message>> taken_before_each_send(const Schedule& schedule, int peer,
                                                                 int worker,
                                                                 const std::vector<Action>& list) {
  std::map<Message, std::optional<Message>> taken_before;
  std::optional<Message> last_taken;
  for (const Action& action : list) {
    if (action.peer != worker) continue;
    const auto message = message_of(schedule, peer, action);
    if (!message) continue;
    if (is_recv(action.kind)) {
      last_taken = message;
    } else {
      taken_before[*message] = last_taken;
    }
  }
  return taken_before;
}

}  // namespace

bool Message::operator==(const Message& other) const { return order_of(*this) == order_of(other); }
bool Message::operator<(const Message& other) const { return order_of(*this) < order_of(other); }

std::optional<Message> message_of(const Schedule& schedule, int worker, const Action& action) {
  const int stage = schedule.stage_of(worker, action);
  Message message;
  message.microbatch = schedule.global_microbatch(action);
  message.slice = action.slice;
  switch (action.kind) {
    case ActionKind::SendActivation: message.to_stage = stage + 1; break;
    case ActionKind::RecvActivation: message.to_stage = stage; break;
    case ActionKind::SendGrad: message.gradient = true, message.to_stage = stage - 1; break;
    case ActionKind::RecvGrad: message.gradient = true, message.to_stage = stage; break;
    default: return std::nullopt;
  }
  return message;
}

std::vector<std::optional<Message>> sends_released_by_receives(
    const Schedule& schedule, int worker, const std::vector<std::vector<Action>>& lists) {
  const std::vector<Action>& mine = lists.at(size_t(worker));
  std::map<int, std::map<Message, std::optional<Message>>> by_peer;
  std::vector<std::optional<Message>> released(mine.size());
  for (size_t k = 0; k < mine.size(); ++k) {
    const Action& action = mine[k];
    if (!is_recv(action.kind) || action.peer == worker) continue;
    auto peer = by_peer.find(action.peer);
    if (peer == by_peer.end()) {
      peer = by_peer.emplace(action.peer, taken_before_each_send(schedule, action.peer, worker,
                                                                 lists.at(size_t(action.peer)))).first;
    }
    const auto sent = peer->second.find(*message_of(schedule, worker, action));
    if (sent != peer->second.end()) released[k] = sent->second;
  }
  return released;
}

}  // namespace pipetrain::schedule
