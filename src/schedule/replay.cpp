#include "schedule/replay.h"

#include <algorithm>
#include <deque>
#include <fmt/format.h>
#include <map>
#include <optional>

#include "schedule/steps.h"

namespace pipetrain::schedule {
namespace {

ActionKind matching_recv(ActionKind send) {
  return send == ActionKind::SendActivation ? ActionKind::RecvActivation : ActionKind::RecvGrad;
}

// What a transfer carries, as the receiving stage sees it.
bool same_payload(const Schedule& s, int sender, const Action& send, int receiver,
                  const Action& recv) {
  int from = s.stage_of(sender, send), to = s.stage_of(receiver, recv);
  int expected = send.kind == ActionKind::SendActivation ? from + 1 : from - 1;
  return recv.kind == matching_recv(send.kind) && to == expected &&
         send.iteration == recv.iteration && send.microbatch == recv.microbatch &&
         send.slice == recv.slice;
}

}  // namespace

TransferMatch match_transfers(const Schedule& s) {
  TransferMatch m;
  m.partner.resize(s.workers);
  std::map<std::pair<int, int>, std::deque<int>> sends, recvs;  // (from, to) -> positions
  for (int w = 0; w < s.workers; ++w) {
    m.partner[w].assign(s.actions[w].size(), -1);
    for (size_t k = 0; k < s.actions[w].size(); ++k) {
      const Action& a = s.actions[w][k];
      if (is_send(a.kind)) sends[{w, a.peer}].push_back(static_cast<int>(k));
      if (is_recv(a.kind)) recvs[{a.peer, w}].push_back(static_cast<int>(k));
    }
  }
  auto flag = [&](int w, int k, std::string problem) {
    // Keep the problem that comes first in the lists (lowest position, then worker).
    if (m.bad_worker < 0 || k < m.bad_position || (k == m.bad_position && w < m.bad_worker)) {
      m.bad_worker = w;
      m.bad_position = k;
      m.problem = std::move(problem);
    }
  };
  for (auto& [channel, send_positions] : sends) {
    auto [from, to] = channel;
    auto& recv_positions = recvs[channel];
    size_t n = std::min(send_positions.size(), recv_positions.size());
    for (size_t i = 0; i < n; ++i) {
      int ks = send_positions[i], kr = recv_positions[i];
      if (!same_payload(s, from, s.actions[from][ks], to, s.actions[to][kr])) {
        flag(from, ks,
             fmt::format("this send to worker {} meets a recv for something else there "
                         "(position {}) in FIFO order: a recv is missing or out of order",
                         to, kr));
        continue;
      }
      m.partner[from][ks] = kr;
      m.partner[to][kr] = ks;
    }
    for (size_t i = n; i < send_positions.size(); ++i)
      flag(from, send_positions[i],
           fmt::format("send to worker {} has no matching recv on worker {} (missing recv)", to,
                       to));
  }
  for (auto& [channel, recv_positions] : recvs) {
    size_t sent = sends.count(channel) ? sends[channel].size() : 0;
    for (size_t i = sent; i < recv_positions.size(); ++i)
      flag(channel.second, recv_positions[i],
           fmt::format("recv from worker {} has no matching send (missing send)", channel.first));
  }
  return m;
}

namespace {

// Per worker, the position of its last OptimizerStep of each iteration, in order (the k-th
// meets every k-th). With several chunks a worker has one OptimizerStep per chunk, but the
// update's collective (the global norm over every chunk's gradient) runs once, at the last.
std::vector<std::vector<size_t>> update_positions(const Schedule& s) {
  std::vector<std::vector<size_t>> out(size_t(s.workers));
  for (int w = 0; w < s.workers; ++w) {
    const auto& actions = s.actions[size_t(w)];
    for (size_t k = 0; k < actions.size(); ++k) {
      if (actions[k].kind != ActionKind::OptimizerStep) continue;
      auto& mine = out[size_t(w)];
      const bool same_iteration = !mine.empty() && actions[mine.back()].iteration == actions[k].iteration;
      if (same_iteration) mine.back() = k; else mine.push_back(k);
    }
  }
  return out;
}

// The ordinal of the update at position k of worker w, if every worker has one of that ordinal.
std::optional<size_t> barrier_ordinal(const std::vector<std::vector<size_t>>& updates, int w,
                                      size_t k) {
  const auto& mine = updates[size_t(w)];
  const auto at = std::lower_bound(mine.begin(), mine.end(), k);
  if (at == mine.end() || *at != k) return std::nullopt;  // an earlier chunk's update: no barrier
  const size_t ordinal = size_t(at - mine.begin());
  for (const auto& other : updates) {
    if (other.size() <= ordinal) return std::nullopt;
  }
  return ordinal;
}

// Per worker, the posted reductions of an update (ReplayOptions::posted_reductions): what the
// next OptimizerStep takes over, then the update waiting for them to finish.
struct PostedUpdates {
  std::vector<double> posted_end;  // latest end of the reductions posted since the last update
  struct Pending {
    int version;
    double ready;  // reductions done + the optimizer step's time: the finish point's earliest end
  };
  std::vector<std::optional<Pending>> pending;
  explicit PostedUpdates(int workers) : posted_end(size_t(workers), -1), pending(size_t(workers)) {}
  // Before `a` runs on worker w: the time it may start, at least `free`.
  double settle(int w, const Action& a, double free) {
    auto& update = pending[size_t(w)];
    if (!update || !needs_update_done(a, update->version)) return free;
    const double start = std::max(free, update->ready);
    update.reset();
    return start;
  }
  void after_update(int w, const Action& a, double optimizer_ms) {
    auto& end = posted_end[size_t(w)];
    if (end < 0) return;
    pending[size_t(w)] = Pending{a.version, end + optimizer_ms};
    end = -1;
  }
};

// Each worker runs its actions in order while it can; one that waits on a peer (a transfer
// whose other end is not there yet, an update barrier not everyone reached) stops it until a
// later pass over the workers.
class Replayer {
 public:
  Replayer(const Schedule& s, const TransferMatch& match, const ActionDuration& duration,
           const ReplayOptions& options)
      : s_(s), match_(match), duration_(duration), options_(options),
        updates_(options.update_barrier ? update_positions(s) : std::vector<std::vector<size_t>>{}),
        posted_(s.workers), free_(size_t(s.workers), 0.0) {
    r_.times.resize(size_t(s.workers));
    r_.stopped_at.assign(size_t(s.workers), 0);
    for (int w = 0; w < s.workers; ++w) r_.times[size_t(w)].resize(s.actions[size_t(w)].size());
  }

  ReplayResult run() && {
    for (bool progress = true; progress;) {
      progress = false;
      for (int w = 0; w < s_.workers; ++w) {
        while (r_.stopped_at[size_t(w)] < s_.actions[size_t(w)].size() && step(w)) progress = true;
      }
    }
    r_.finished = true;
    for (int w = 0; w < s_.workers; ++w) r_.finished &= r_.stopped_at[size_t(w)] == s_.actions[size_t(w)].size();
    return std::move(r_);
  }

 private:
  // Runs worker w's next action; false when it has to wait.
  bool step(int w) {
    const size_t k = r_.stopped_at[size_t(w)];
    const Action& a = s_.actions[size_t(w)][k];
    free_[size_t(w)] = posted_.settle(w, a, free_[size_t(w)]);
    if (options_.update_barrier && a.kind == ActionKind::OptimizerStep) {
      if (const auto ordinal = barrier_ordinal(updates_, w, k)) return run_barrier(*ordinal);
    }
    if (options_.posted_reductions && a.kind == ActionKind::AllReduceGrads) {
      const ActionTime& t = run_for(w, k, free_[size_t(w)] + duration_(w, a));  // keeps w free
      posted_.posted_end[size_t(w)] = std::max(posted_.posted_end[size_t(w)], t.end);
      return true;
    }
    if (!is_comm(a.kind)) {
      const double d = duration_(w, a);
      free_[size_t(w)] = run_for(w, k, free_[size_t(w)] + d).end;
      if (a.kind == ActionKind::OptimizerStep) posted_.after_update(w, a, d);
      return true;
    }
    return options_.mode == SendMode::Eager ? eager_transfer(w, k, a) : rendezvous(w, k, a);
  }

  // Every worker's update of `ordinal` starts together, once the last of them stands at its own.
  bool run_barrier(size_t ordinal) {
    double start = 0;
    for (int u = 0; u < s_.workers; ++u) {
      if (r_.stopped_at[size_t(u)] != updates_[size_t(u)][ordinal]) return false;
      start = std::max(start, free_[size_t(u)]);
    }
    for (int u = 0; u < s_.workers; ++u) {
      const size_t ku = updates_[size_t(u)][ordinal];
      const double d = duration_(u, s_.actions[size_t(u)][ku]);
      r_.times[size_t(u)][ku] = {start, start + d};
      free_[size_t(u)] = start + d;
      posted_.after_update(u, s_.actions[size_t(u)][ku], d);
      ++r_.stopped_at[size_t(u)];
    }
    return true;
  }

  // A send is posted (its end is when the data arrives); a receive waits for the data.
  bool eager_transfer(int w, size_t k, const Action& a) {
    double& free = free_[size_t(w)];
    if (is_send(a.kind)) {
      const double post = options_.send_post ? options_.send_post(w, a) : 0.0;
      run_for(w, k, free + post + duration_(w, a));
      free += post;
      return true;
    }
    const int kp = match_.partner[size_t(w)][k];
    if (kp < 0 || r_.stopped_at[size_t(a.peer)] <= size_t(kp)) return false;  // not sent yet
    free = run_for(w, k, std::max(free, r_.times[size_t(a.peer)][size_t(kp)].end)).end;
    return true;
  }

  // Both ends of a transfer run together, when both stand at it.
  bool rendezvous(int w, size_t k, const Action& a) {
    const int peer = a.peer, kp = match_.partner[size_t(w)][k];
    if (kp < 0 || r_.stopped_at[size_t(peer)] != size_t(kp)) return false;  // blocked
    const Action& send = is_send(a.kind) ? a : s_.actions[size_t(peer)][size_t(kp)];
    const double start = std::max(free_[size_t(w)], free_[size_t(peer)]);
    const double end = start + duration_(is_send(a.kind) ? w : peer, send);
    r_.times[size_t(w)][k] = r_.times[size_t(peer)][size_t(kp)] = {start, end};
    free_[size_t(w)] = free_[size_t(peer)] = end;
    ++r_.stopped_at[size_t(w)];
    ++r_.stopped_at[size_t(peer)];
    return true;
  }

  // Worker w's action k runs from its free time to `end`; w moves on to its next action.
  const ActionTime& run_for(int w, size_t k, double end) {
    ActionTime& t = r_.times[size_t(w)][k];
    t = {free_[size_t(w)], end};
    ++r_.stopped_at[size_t(w)];
    return t;
  }

  const Schedule& s_;
  const TransferMatch& match_;
  const ActionDuration& duration_;
  const ReplayOptions& options_;
  const std::vector<std::vector<size_t>> updates_;  // update_positions, with the barrier
  PostedUpdates posted_;
  std::vector<double> free_;  // per worker: when it can start its next action
  ReplayResult r_;
};

}  // namespace

ReplayResult replay(const Schedule& s, const TransferMatch& match,
                    const ActionDuration& duration, const ReplayOptions& options) {
  return Replayer(s, match, duration, options).run();
}

}  // namespace pipetrain::schedule
