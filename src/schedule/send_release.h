#pragma once
// When a worker may let go of a message it sent, without waiting on anyone.
//
// The runtime's sends are asynchronous: a sent tensor stays alive until its send is waited for,
// and waiting early could block on a receiver that is itself waiting for this worker. But when
// worker w takes a message from peer p that p sent after p had taken some message of w's, that
// message of w's has arrived: waiting for it returns at once, and so do the waits for w's older
// sends to p (messages between two workers arrive in order). So each receive releases a known
// prefix of the sends to its peer, found from the two workers' lists of the step.
#include <optional>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

// What a transfer carries: an activation into a stage or a gradient into a stage, of one
// microbatch (numbered over the whole run) and token slice. Both ends name it alike.
struct Message {
  bool gradient = false;
  int to_stage = 0;
  int microbatch = 0;
  int slice = 0;
  bool operator==(const Message& other) const;
  bool operator<(const Message& other) const;
};

// The message of a send or receive `action` of `worker`; nullopt for other actions.
std::optional<Message> message_of(const Schedule& schedule, int worker, const Action& action);

// For each action of lists[worker] (every worker's lists of one step): a receive from peer p
// gives the last message `worker` sent to p that p had taken before it sent this one, when p's
// list of the step shows both; everything else gives nullopt.
std::vector<std::optional<Message>> sends_released_by_receives(
    const Schedule& schedule, int worker, const std::vector<std::vector<Action>>& lists);

}  // namespace pipetrain::schedule
