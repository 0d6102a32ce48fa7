#pragma once
// The pipeline's StopVerdict (train/training_loop.h): a signal any worker received (SIGINT if
// both were) and a non-finite loss on the reporting worker. Each step's vote is posted at its
// end and counted at the end of the next step, so a step boundary is no barrier: a no-flush
// pipeline keeps its workers' natural offset from step to step (a blocking vote realigned
// them, costing up to an action's time per step). A stop therefore lands one step after the
// vote, on the same step on every worker.
#include <cstdint>
#include <deque>

#include <ATen/core/Tensor.h>

#include "runtime/comm.h"
#include "train/training_loop.h"  // StopVerdict

namespace pipetrain::runtime {

class StopVotes {
 public:
  // All ranks, in the same order relative to their other group joins.
  explicit StopVotes(Comm& comm);
  // Posts this step's vote and returns the verdict on the previous one (none after the first).
  StopVerdict cast(int64_t step, double loss, bool non_finite_loss_here);
  // The verdict on the vote cast last (none if it was counted already).
  StopVerdict drain();

 private:
  Comm& comm_;
  int group_;
  at::Tensor pending_;
  int handle_ = -1;
  int64_t pending_step_ = 0;
  double pending_loss_ = 0;
};

// A pipeline's validation stops between batches, at the same batch on every worker: each
// batch's vote (a signal seen here) is posted before the batch and counted `lag` batches later
// (the pipeline's depth), so waiting for it never holds the first stages back. `group`: the
// validating workers only, posting nothing else.
class BatchStopVotes {
 public:
  BatchStopVotes(Comm& comm, int group, int lag);
  // Posts batch `batch`'s vote; true when the vote of `lag` batches before says stop.
  bool stop_before(int64_t batch);
  void drain();  // waits for the votes still in flight (the same number on every member)

 private:
  Comm& comm_;
  int group_, lag_;
  std::deque<std::pair<at::Tensor, int>> posted_;  // (vote, handle), oldest first
};

}  // namespace pipetrain::runtime
