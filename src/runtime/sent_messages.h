#pragma once
// A worker's sends still in flight, by message, so that a receive can let go of those its peer
// has taken (schedule/send_release.h): their tensors are freed within the step instead of at
// the step's end (a no-flush step: the next step's end), which held up to two steps of sends.
#include <cstdint>
#include <map>
#include <optional>

#include "runtime/comm.h"
#include "schedule/send_release.h"

namespace pipetrain::runtime {

class SentMessages {
 public:
  void sent(const schedule::Message& message, int64_t ticket, int peer_rank);
  // `message` has arrived: wait for it and every older send to its peer (at once: they are
  // done) and forget them. Nothing for a message not sent by this process (before a resume).
  void release(const std::optional<schedule::Message>& message, Comm& comm);
  // The sends before `ticket` were waited for at a step's end.
  void forget_before(int64_t ticket);

 private:
  struct Sent {
    int64_t ticket;
    int peer_rank;
  };
  std::map<schedule::Message, Sent> in_flight_;
};

}  // namespace pipetrain::runtime
