#include "runtime/sent_messages.h"

namespace pipetrain::runtime {

void SentMessages::sent(const schedule::Message& message, int64_t ticket, int peer_rank) {
  in_flight_[message] = {ticket, peer_rank};
}

void SentMessages::release(const std::optional<schedule::Message>& message, Comm& comm) {
  if (!message) return;
  const auto found = in_flight_.find(*message);
  if (found == in_flight_.end()) return;
  const Sent last = found->second;
  comm.wait_sends_to(last.peer_rank, last.ticket);
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const bool done = it->second.peer_rank == last.peer_rank && it->second.ticket <= last.ticket;
    it = done ? in_flight_.erase(it) : std::next(it);
  }
}

void SentMessages::forget_before(int64_t ticket) {
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    it = it->second.ticket < ticket ? in_flight_.erase(it) : std::next(it);
  }
}

}  // namespace pipetrain::runtime
