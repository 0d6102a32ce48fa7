#pragma once
// Executes a Schedule's lists: each worker runs its actions in order. Two transfer semantics:
// - Rendezvous: a send and its matching recv BLOCK until both workers have reached them, then
//   take the same time on both (the strictest model: the validator's deadlock check).
// - Eager: a send is posted and the sender moves on at once (the runtime's asynchronous Gloo
//   send); the data arrives after the transfer time and the recv waits for it (the simulator).
#include <functional>
#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

// Pairs the k-th send from worker a to worker b with the k-th recv on b from a (FIFO per
// channel, like tagged point-to-point messages).
struct TransferMatch {
  std::vector<std::vector<int>> partner;  // [worker][position] -> position on the peer, or -1
  // First transfer without a partner or whose partner carries something else ("" if none).
  int bad_worker = -1;
  int bad_position = -1;
  std::string problem;
};
TransferMatch match_transfers(const Schedule& schedule);

struct ActionTime {
  double start = 0;
  double end = 0;
};

struct ReplayResult {
  std::vector<std::vector<ActionTime>> times;  // [worker][position]
  bool finished = false;                       // false: deadlock
  std::vector<size_t> stopped_at;              // per worker: first position not executed
};

// duration(worker, action): time of a compute/update action, or of the transfer for a send
// (the matching recv takes the same time). Requires a match without problems.
using ActionDuration = std::function<double(int worker, const Action& action)>;
enum class SendMode { Rendezvous, Eager };
struct ReplayOptions {
  SendMode mode = SendMode::Rendezvous;
  // Every worker's k-th update starts at the same moment, when the last worker reaches its own
  // (a collective inside the update, such as a global gradient norm). A worker's update of an
  // iteration is its last OptimizerStep of that iteration (one per chunk).
  bool update_barrier = false;
  // Eager only (none: free): the time a send keeps its sender busy before it moves on (posting
  // it: Gloo writes to the socket in the caller's thread); the data leaves after it.
  ActionDuration send_post;
  // AllReduceGrads is posted, as the runtime does for no-flush schedules: it keeps its worker
  // busy for no time and ends when the reduction does; the update it feeds is finished (reduction
  // done, then the optimizer step's time) before the first action that needs it
  // (steps.h: needs_update_done), which waits for whatever is left. Off: it blocks its worker.
  bool posted_reductions = false;
};
ReplayResult replay(const Schedule& schedule, const TransferMatch& match,
                    const ActionDuration& duration, const ReplayOptions& options = {});

}  // namespace pipetrain::schedule
