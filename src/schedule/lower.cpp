#include "schedule/lower.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>

#include "schedule/catalogue.h"

namespace pipetrain::schedule {
namespace {

constexpr double kUnset = std::numeric_limits<double>::infinity();

// Appends AllReduceGrads (when dp_width > 1) and OptimizerStep after the action that completes
// the last gradient of an update group on a chunk: an iteration for sync/2BW, a microbatch for
// PipeDream-style per-microbatch updates.
std::vector<std::vector<Action>> insert_updates(const Schedule& s, const ComputeOrder& order) {
  const bool per_mb = updates_per_microbatch(s.policy.kind);
  const int per_group = per_mb ? s.slices : s.microbatches * s.slices;
  std::vector<std::vector<Action>> lists(s.workers);
  for (int w = 0; w < s.workers; ++w) {
    std::map<std::pair<int, int>, int> done;  // (group, chunk) -> gradients completed
    for (const ComputeItem& item : order[w]) {
      Action a{item.kind, item.iteration, item.microbatch, item.slice, item.chunk, -1, -1};
      lists[w].push_back(a);
      if (!is_gradient_producer(item.kind)) continue;
      int group = per_mb ? item.iteration * s.microbatches + item.microbatch : item.iteration;
      if (++done[{group, item.chunk}] != per_group) continue;
      Action update = a;
      update.slice = 0;
      if (!per_mb) update.microbatch = 0;
      if (s.dp_width > 1) {
        update.kind = ActionKind::AllReduceGrads;
        lists[w].push_back(update);
      }
      update.kind = ActionKind::OptimizerStep;
      lists[w].push_back(update);
    }
  }
  return lists;
}

// Fills Action::version following the policy (see WeightPolicyKind).
void assign_versions(const Schedule& s, std::vector<std::vector<Action>>& lists) {
  for (int w = 0; w < s.workers; ++w) {
    std::vector<int> steps(s.chunks, 0);
    std::map<std::tuple<int, int, int>, int> forward_version;  // (gmb, slice, chunk)
    for (Action& a : lists[w]) {
      if (a.kind == ActionKind::OptimizerStep) {
        a.version = ++steps[a.chunk];
        continue;
      }
      if (!is_compute(a.kind)) continue;
      auto key = std::make_tuple(s.global_microbatch(a), a.slice, a.chunk);
      switch (s.policy.kind) {
        case WeightPolicyKind::Sync:
        case WeightPolicyKind::Predicted:
          a.version = steps[a.chunk];
          break;
        case WeightPolicyKind::DoubleBuffer:
          a.version = double_buffer_version(a.iteration, s.policy.sync_groups);
          break;
        case WeightPolicyKind::Stash:
          if (a.kind == ActionKind::Forward) forward_version[key] = steps[a.chunk];
          a.version = forward_version.count(key) ? forward_version[key] : steps[a.chunk];
          break;
      }
    }
  }
}

// Index of the "forward done" / "input gradient done" marker of (stage, gmb, slice).
struct Markers {
  int stages, microbatches, slices;
  std::vector<double> end;
  Markers(int stages_, int microbatches_, int slices_)
      : stages(stages_), microbatches(microbatches_), slices(slices_),
        end(2 * stages_ * microbatches_ * slices_, kUnset) {}
  double& at(bool grad, int stage, int gmb, int slice) {
    return end[((grad * stages + stage) * microbatches + gmb) * slices + slice];
  }
};

// Compute intervals of one worker, sorted, to find moments when it is between two actions.
class BusyIntervals {
 public:
  void add(double start, double end) {
    if (end > start) spans_.push_back({start, end});
  }
  void sort() { std::sort(spans_.begin(), spans_.end()); }
  bool inside(double t) const {  // strictly inside some compute
    auto it = std::upper_bound(spans_.begin(), spans_.end(), std::make_pair(t, kUnset));
    for (int back = 0; back < 2 && it != spans_.begin(); ++back) {
      --it;
      if (it->first < t - 1e-12 && t < it->second - 1e-12) return true;
    }
    return false;
  }
  // End times in (from, to].
  void ends_in(double from, double to, std::vector<double>& out) const {
    for (const auto& span : spans_)
      if (span.second > from && span.second <= to) out.push_back(span.second);
  }

 private:
  std::vector<std::pair<double, double>> spans_;
};

// Earliest moment in [ready, needed] when neither worker is in the middle of a compute, so the
// blocking transfer stalls nobody; `ready` (the sender waits) when there is none.
double transfer_time(const BusyIntervals& a, const BusyIntervals& b, double ready, double needed) {
  if (!a.inside(ready) && !b.inside(ready)) return ready;
  std::vector<double> candidates;
  a.ends_in(ready, needed, candidates);
  b.ends_in(ready, needed, candidates);
  std::sort(candidates.begin(), candidates.end());
  for (double t : candidates)
    if (!a.inside(t) && !b.inside(t)) return t;
  return ready;
}

// The first stage's B W pairs as one Backward at B's place.
ComputeOrder whole_first_stage_backward(const Schedule& s, ComputeOrder order) {
  for (int w = 0; w < s.workers; ++w) {
    auto& items = order[size_t(w)];
    const auto on_first_stage = [&](const ComputeItem& item) {
      return s.stage_of(w, item.chunk) == 0;
    };
    items.erase(std::remove_if(items.begin(), items.end(), [&](const ComputeItem& item) {
      return on_first_stage(item) && item.kind == ActionKind::BackwardWeight;
    }), items.end());
    for (auto& item : items) {
      if (on_first_stage(item) && item.kind == ActionKind::BackwardInput) item.kind = ActionKind::Backward;
    }
  }
  return order;
}

}  // namespace

std::vector<std::vector<Timed>> dataflow_times(const Schedule& s, const DurationOf& duration_of) {
  const auto& lists = s.actions;
  const int S = s.stages();
  Markers mark(S, s.total_microbatches(), s.slices);
  std::vector<std::vector<Timed>> times(s.workers);
  std::vector<size_t> next(s.workers, 0);
  std::vector<double> free(s.workers, 0.0);
  for (int w = 0; w < s.workers; ++w) times[w].resize(lists[w].size());
  bool progress = true;
  while (progress) {
    progress = false;
    for (int w = 0; w < s.workers; ++w) {
      for (; next[w] < lists[w].size(); ++next[w]) {
        const Action& a = lists[w][next[w]];
        int stage = s.stage_of(w, a), gmb = s.global_microbatch(a);
        double ready = free[w];
        if (a.kind == ActionKind::Forward && stage > 0) {
          ready = std::max(ready, mark.at(false, stage - 1, gmb, a.slice));
        } else if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) {
          ready = std::max(ready, mark.at(false, stage, gmb, a.slice));
          if (stage + 1 < S) ready = std::max(ready, mark.at(true, stage + 1, gmb, a.slice));
        } else if (a.kind == ActionKind::BackwardWeight) {
          ready = std::max(ready, mark.at(true, stage, gmb, a.slice));
        }
        if (ready == kUnset) break;  // waits for another worker
        double duration = is_comm(a.kind) ? 0.0 : duration_of(a);
        times[w][next[w]] = {ready, ready + duration};
        free[w] = ready + duration;
        if (a.kind == ActionKind::Forward) mark.at(false, stage, gmb, a.slice) = free[w];
        if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput)
          mark.at(true, stage, gmb, a.slice) = free[w];
        progress = true;
      }
    }
  }
  for (int w = 0; w < s.workers; ++w) {
    if (next[w] != lists[w].size())
      throw std::logic_error("schedule generator produced an infeasible compute order");
  }
  return times;
}

double nominal_duration(const ScheduleSpec& spec, ActionKind kind, int slices) {
  // Nominal costs only order things; keep them positive whatever the user's costs are.
  double f = spec.nominal_forward > 0 ? spec.nominal_forward : 1.0;
  double b = spec.nominal_backward > 0 ? spec.nominal_backward : 2.0 * f;
  double w = std::clamp(spec.nominal_weight > 0 ? spec.nominal_weight : 0.0, 0.01 * b, 0.99 * b);
  double d = 0;
  switch (kind) {
    case ActionKind::Forward: d = f; break;
    case ActionKind::Backward: d = b; break;
    case ActionKind::BackwardInput: d = b - w; break;
    case ActionKind::BackwardWeight: d = w; break;
    default: return 0.0;
  }
  return d / slices;
}

namespace {

using ActionLists = std::vector<std::vector<Action>>;
using ActionTimes = std::vector<std::vector<Timed>>;
// A boundary tensor's consumer: (gradient?, stage, global microbatch, slice).
using ConsumerKey = std::tuple<bool, int, int, int>;
// (time, 0 = transfer / 1 = action start, worker, position in its list).
using Event = std::tuple<double, int, int, size_t>;

// When each worker computes, and when each boundary tensor's consumer starts.
struct Occupancy {
  std::vector<BusyIntervals> busy;
  std::map<ConsumerKey, double> consumer_start;
};

Occupancy occupancy_of(const Schedule& s, const ActionLists& lists, const ActionTimes& times) {
  Occupancy o{std::vector<BusyIntervals>(s.workers), {}};
  for (int w = 0; w < s.workers; ++w) {
    for (size_t k = 0; k < lists[w].size(); ++k) {
      const Action& a = lists[w][k];
      o.busy[w].add(times[w][k].start, times[w][k].end);
      int stage = s.stage_of(w, a), gmb = s.global_microbatch(a);
      if (a.kind == ActionKind::Forward) o.consumer_start[{false, stage, gmb, a.slice}] = times[w][k].start;
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput)
        o.consumer_start[{true, stage, gmb, a.slice}] = times[w][k].start;
    }
    o.busy[w].sort();
  }
  return o;
}

// Every action's start, and each transfer to another worker at the time it fits between the
// two workers' compute (transfer_time), in time order.
std::vector<Event> timed_events(const Schedule& s, const ActionLists& lists, const ActionTimes& times) {
  const Occupancy o = occupancy_of(s, lists, times);
  std::vector<Event> events;
  for (int w = 0; w < s.workers; ++w) {
    for (size_t k = 0; k < lists[w].size(); ++k) {
      events.emplace_back(times[w][k].start, 1, w, k);
      const Action& a = lists[w][k];
      int stage = s.stage_of(w, a);
      bool sends_activation = a.kind == ActionKind::Forward && stage + 1 < s.stages();
      bool sends_grad = (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) &&
                        stage > 0;
      int peer_stage = sends_activation ? stage + 1 : stage - 1;
      if (!(sends_activation || sends_grad) || s.worker_of_stage(peer_stage) == w) continue;
      int peer = s.worker_of_stage(peer_stage);
      double needed = o.consumer_start.at({sends_grad, peer_stage, s.global_microbatch(a), a.slice});
      events.emplace_back(transfer_time(o.busy[w], o.busy[peer], times[w][k].end, needed), 0, w, k);
    }
  }
  std::sort(events.begin(), events.end());
  return events;
}

// The lists in event order: each transfer a send on its worker and a receive on its peer's.
void emit_in_event_order(Schedule& s, const ActionLists& lists, const std::vector<Event>& events) {
  s.actions.assign(s.workers, {});
  for (const auto& [time, type, w, k] : events) {
    const Action& a = lists[w][k];
    if (type == 1) {
      s.actions[w].push_back(a);
      continue;
    }
    bool activation = a.kind == ActionKind::Forward;
    int peer_stage = s.stage_of(w, a) + (activation ? 1 : -1);
    int peer = s.worker_of_stage(peer_stage);
    Action send{activation ? ActionKind::SendActivation : ActionKind::SendGrad,
                a.iteration, a.microbatch, a.slice, a.chunk, -1, peer};
    Action recv{activation ? ActionKind::RecvActivation : ActionKind::RecvGrad,
                a.iteration, a.microbatch, a.slice, s.chunk_of_stage(peer_stage), -1, w};
    s.actions[w].push_back(send);
    s.actions[peer].push_back(recv);
  }
}

}  // namespace

Schedule lower_schedule(Schedule s, const ComputeOrder& order, const ScheduleSpec& spec) {
  ActionLists lists = insert_updates(s, whole_first_stage_backward(s, order));
  assign_versions(s, lists);
  s.actions = lists;
  const ActionTimes times = dataflow_times(
      s, [&](const Action& a) { return nominal_duration(spec, a.kind, s.slices); });
  emit_in_event_order(s, lists, timed_events(s, lists, times));
  return s;
}

}  // namespace pipetrain::schedule
