#include "sim/shared_cores.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace pipetrain::sim {
using schedule::Action;
using schedule::ActionKind;
using schedule::ActionTime;

namespace {

// How many workers compute on each interval [starts[i], starts[i+1]) of a timeline.
struct BusyProfile {
  std::vector<double> starts;
  std::vector<int> busy;
};

BusyProfile busy_profile(const schedule::Schedule& s, const std::vector<std::vector<ActionTime>>& times) {
  std::vector<std::pair<double, int>> changes;  // ends sort before starts at equal times
  for (int w = 0; w < s.workers; ++w) {
    for (size_t k = 0; k < times[size_t(w)].size(); ++k) {
      const ActionTime& t = times[size_t(w)][k];
      if (!counts_as_busy(s.actions[size_t(w)][k].kind) || t.end <= t.start) continue;
      changes.push_back({t.start, +1});
      changes.push_back({t.end, -1});
    }
  }
  std::sort(changes.begin(), changes.end());
  BusyProfile profile{{0.0}, {0}};
  for (const auto& [time, delta] : changes) {
    if (time > profile.starts.back()) {
      profile.starts.push_back(time);
      profile.busy.push_back(profile.busy.back());
    }
    profile.busy.back() += delta;
  }
  return profile;
}

// The time an action that starts at `start` needs for `work` ms of its own compute, sharing the
// cores with the other workers the profile shows busy (itself excluded where the profile holds
// it: [start, own_end)). Each worker stands for `replicas` processes.
double shared_duration(const BusyProfile& profile, double start, double own_end, double work,
                       double cores, int replicas) {
  size_t i = size_t(std::upper_bound(profile.starts.begin(), profile.starts.end(), start) -
                    profile.starts.begin()) - 1;
  double t = start, left = work;
  while (true) {
    const double until = i + 1 < profile.starts.size() ? profile.starts[i + 1]
                                                       : std::numeric_limits<double>::infinity();
    const int others = profile.busy[i] - (t < own_end ? 1 : 0);
    const double rate = std::min(1.0, cores / double(replicas * (std::max(others, 0) + 1)));
    if ((until - t) * rate >= left) return t + left / rate - start;
    left -= (until - t) * rate;
    t = until;
    ++i;
  }
}

}  // namespace

schedule::ReplayResult replay_on_shared_cores(const schedule::Schedule& s,
                                              const schedule::TransferMatch& match,
                                              const CostModel& costs,
                                              const schedule::ReplayOptions& options) {
  std::vector<std::vector<double>> stretch(size_t(s.workers));
  for (int w = 0; w < s.workers; ++w) stretch[size_t(w)].assign(s.actions[size_t(w)].size(), 1.0);
  // The replay hands back the schedule's own Action objects: their position is their index.
  const auto position = [&](int w, const Action& a) {
    const auto& list = s.actions[size_t(w)];
    if (&a < list.data() || &a >= list.data() + list.size())
      throw std::logic_error("replay passed an action that is not the schedule's");
    return size_t(&a - list.data());
  };
  const auto duration = [&](int w, const Action& a) {
    const double own = costs.duration_ms(s, w, a);
    return counts_as_busy(a.kind) ? own * stretch[size_t(w)][position(w, a)] : own;
  };
  const auto replay = [&] { return schedule::replay(s, match, duration, options); };
  // Half steps damp the back-and-forth between "everyone overlaps, so all slow down" and
  // "all slowed down, so they overlap less".
  constexpr int kRounds = 60;
  constexpr double kSettled = 1e-6;
  for (int round = 0; round < kRounds; ++round) {
    const schedule::ReplayResult r = replay();
    if (!r.finished) return r;
    const BusyProfile profile = busy_profile(s, r.times);
    double moved = 0;
    for (int w = 0; w < s.workers; ++w) {
      for (size_t k = 0; k < s.actions[size_t(w)].size(); ++k) {
        const Action& a = s.actions[size_t(w)][k];
        const double own = counts_as_busy(a.kind) ? costs.duration_ms(s, w, a) : 0.0;
        if (own <= 0) continue;
        const ActionTime& t = r.times[size_t(w)][k];
        const double needed =
            shared_duration(profile, t.start, t.end, own, costs.shared_cores, s.dp_width) / own;
        double& factor = stretch[size_t(w)][k];
        const double next = 0.5 * (factor + needed);
        moved = std::max(moved, std::abs(next - factor));
        factor = next;
      }
    }
    if (moved < kSettled) break;
  }
  return replay();
}

}  // namespace pipetrain::sim
