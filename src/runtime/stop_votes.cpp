#include "runtime/stop_votes.h"

#include <csignal>
#include <numeric>
#include <vector>

#include <ATen/ATen.h>

#include "core/stop_signal.h"

namespace pipetrain::runtime {
namespace {

std::vector<int> every_rank(const Comm& comm) {
  std::vector<int> ranks(size_t(comm.world_size()));
  std::iota(ranks.begin(), ranks.end(), 0);
  return ranks;
}

}  // namespace

// Its own group: the world group's collectives (norms, memory reports) are posted at points
// that differ between workers, and a group's members must post in the same order.
StopVotes::StopVotes(Comm& comm) : comm_(comm), group_(comm.join_group("stop-votes", every_rank(comm))) {}

StopVerdict StopVotes::cast(int64_t step, double loss, bool non_finite_loss_here) {
  const StopVerdict previous = drain();
  const int received = stop_signal();
  pending_ = at::zeros({3}, at::kDouble);
  auto votes = pending_.accessor<double, 1>();
  votes[0] = received == SIGINT ? 1.0 : 0.0;
  votes[1] = received == SIGTERM ? 1.0 : 0.0;
  votes[2] = non_finite_loss_here ? 1.0 : 0.0;
  handle_ = comm_.post_all_reduce_sum(pending_, group_);
  pending_step_ = step;
  pending_loss_ = loss;
  return previous;
}

StopVerdict StopVotes::drain() {
  StopVerdict verdict;
  if (handle_ < 0) return verdict;
  comm_.wait_all_reduce(handle_);
  handle_ = -1;
  const auto votes = pending_.accessor<double, 1>();
  verdict.signal = votes[0] > 0 ? SIGINT : votes[1] > 0 ? SIGTERM : 0;
  verdict.non_finite_loss = votes[2] > 0;
  verdict.step = pending_step_;
  verdict.loss = pending_loss_;
  return verdict;
}

BatchStopVotes::BatchStopVotes(Comm& comm, int group, int lag) : comm_(comm), group_(group), lag_(lag) {}

bool BatchStopVotes::stop_before(int64_t batch) {
  auto& [vote, handle] = posted_.emplace_back(at::full({1}, stop_signal() != 0 ? 1.0 : 0.0, at::kDouble), -1);
  handle = comm_.post_all_reduce_sum(vote, group_);
  if (batch < lag_) return false;
  auto [oldest, oldest_handle] = posted_.front();
  posted_.pop_front();
  comm_.wait_all_reduce(oldest_handle);
  return oldest.item<double>() > 0;
}

void BatchStopVotes::drain() {
  for (auto& [vote, handle] : posted_) comm_.wait_all_reduce(handle);
  posted_.clear();
}

}  // namespace pipetrain::runtime
