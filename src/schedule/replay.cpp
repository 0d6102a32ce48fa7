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

}  // namespace

ReplayResult replay(const Schedule& s, const TransferMatch& match,
                    const ActionDuration& duration, const ReplayOptions& options) {
  const SendMode mode = options.mode;
  const bool update_barrier = options.update_barrier;
  const ActionDuration& send_post = options.send_post;
  const auto updates = update_barrier ? update_positions(s) : std::vector<std::vector<size_t>>{};
  PostedUpdates posted(s.workers);
  ReplayResult r;
  r.times.resize(s.workers);
  r.stopped_at.assign(s.workers, 0);
  std::vector<double> free(s.workers, 0.0);
  for (int w = 0; w < s.workers; ++w) r.times[w].resize(s.actions[w].size());
  bool progress = true;
  while (progress) {
    progress = false;
    for (int w = 0; w < s.workers; ++w) {
      auto& k = r.stopped_at[w];
      while (k < s.actions[w].size()) {
        const Action& a = s.actions[w][k];
        free[w] = posted.settle(w, a, free[w]);
        const auto ordinal = update_barrier && a.kind == ActionKind::OptimizerStep
                                 ? barrier_ordinal(updates, w, k)
                                 : std::nullopt;
        if (ordinal) {
          // Waits until every worker stands at its update of this ordinal; all start together.
          bool all_here = true;
          double start = 0;
          for (int u = 0; u < s.workers; ++u) {
            all_here &= r.stopped_at[u] == updates[size_t(u)][*ordinal];
            start = std::max(start, free[u]);
          }
          if (!all_here) break;
          for (int u = 0; u < s.workers; ++u) {
            const size_t ku = updates[size_t(u)][*ordinal];
            const double d = duration(u, s.actions[u][ku]);
            r.times[u][ku] = {start, start + d};
            free[u] = start + d;
            posted.after_update(u, s.actions[u][ku], d);
            ++r.stopped_at[u];
          }
          progress = true;
          continue;
        }
        if (options.posted_reductions && a.kind == ActionKind::AllReduceGrads) {
          r.times[w][k] = {free[w], free[w] + duration(w, a)};
          posted.posted_end[size_t(w)] = std::max(posted.posted_end[size_t(w)], r.times[w][k].end);
          ++k;
          progress = true;
          continue;
        }
        if (!is_comm(a.kind)) {
          double d = duration(w, a);
          r.times[w][k] = {free[w], free[w] + d};
          free[w] += d;
          if (a.kind == ActionKind::OptimizerStep) posted.after_update(w, a, d);
          ++k;
          progress = true;
          continue;
        }
        int peer = a.peer, kp = match.partner[w][k];
        if (mode == SendMode::Eager) {
          if (is_send(a.kind)) {  // posted; the send's end is when the data arrives
            const double post = send_post ? send_post(w, a) : 0.0;
            r.times[w][k] = {free[w], free[w] + post + duration(w, a)};
            free[w] += post;
          } else {
            if (kp < 0 || r.stopped_at[peer] <= static_cast<size_t>(kp)) break;  // not sent yet
            const double arrival = r.times[peer][kp].end;
            r.times[w][k] = {free[w], std::max(free[w], arrival)};
            free[w] = r.times[w][k].end;
          }
          ++k;
          progress = true;
          continue;
        }
        if (kp < 0 || r.stopped_at[peer] != static_cast<size_t>(kp)) break;  // blocked
        const Action& send = is_send(a.kind) ? a : s.actions[peer][kp];
        double start = std::max(free[w], free[peer]);
        double end = start + duration(is_send(a.kind) ? w : peer, send);
        r.times[w][k] = {start, end};
        r.times[peer][kp] = {start, end};
        free[w] = free[peer] = end;
        ++k;
        ++r.stopped_at[peer];
        progress = true;
      }
    }
  }
  r.finished = true;
  for (int w = 0; w < s.workers; ++w) r.finished &= r.stopped_at[w] == s.actions[w].size();
  return r;
}

}  // namespace pipetrain::schedule
