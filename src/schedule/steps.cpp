#include "schedule/steps.h"

#include <map>
#include <tuple>

#include "schedule/catalogue.h"

namespace pipetrain::schedule {
namespace {

// A message between two workers: (sender, receiver, gradient?, iteration, microbatch, slice, chunk
// of the sender). The runtime's tags match the same fields.
using Message = std::tuple<int, int, bool, int, int, int, int>;

std::map<Message, size_t> send_positions(const Schedule& schedule) {
  std::map<Message, size_t> sends;
  for (int w = 0; w < schedule.workers; ++w) {
    const auto& list = schedule.actions.at(size_t(w));
    for (size_t i = 0; i < list.size(); ++i) {
      const Action& a = list[i];
      if (!is_send(a.kind)) continue;
      sends[{w, a.peer, a.kind == ActionKind::SendGrad, a.iteration, a.microbatch, a.slice, a.chunk}] = i;
    }
  }
  return sends;
}

// The sender's position of what the receive at `a` (on worker w) takes.
size_t sender_position(const std::map<Message, size_t>& sends, const Schedule& schedule, int w,
                       const Action& a) {
  const bool gradient = a.kind == ActionKind::RecvGrad;
  // The sender's chunk: an activation comes from the stage before, a gradient from the one after.
  const int stage = schedule.stage_of(w, a) + (gradient ? 1 : -1);
  return sends.at({a.peer, w, gradient, a.iteration, a.microbatch, a.slice, schedule.chunk_of_stage(stage)});
}

// Per worker, the index after its last update of each iteration.
std::vector<std::vector<size_t>> update_ends(const Schedule& schedule) {
  std::vector<std::vector<size_t>> ends(size_t(schedule.workers),
                                        std::vector<size_t>(size_t(schedule.iterations), 0));
  for (int w = 0; w < schedule.workers; ++w) {
    const auto& list = schedule.actions.at(size_t(w));
    for (size_t i = 0; i < list.size(); ++i) {
      if (list[i].kind == ActionKind::OptimizerStep) ends[size_t(w)].at(size_t(list[i].iteration)) = i + 1;
    }
  }
  return ends;
}

}  // namespace

bool needs_update_done(const Action& action, int produced_version) {
  return action.kind == ActionKind::OptimizerStep ||
         (is_compute(action.kind) && action.version >= produced_version);
}

std::vector<StepBounds> step_bounds(const Schedule& schedule, int first_step) {
  const auto ends = update_ends(schedule);
  const bool overlap = !flushes(schedule.policy.kind);
  const auto sends = overlap ? send_positions(schedule) : std::map<Message, size_t>{};
  std::vector<StepBounds> bounds(size_t(schedule.workers), StepBounds(size_t(first_step), {0, 0}));
  std::vector<size_t> begin(size_t(schedule.workers), 0);
  for (int it = first_step; it < schedule.iterations; ++it) {
    const bool last = it + 1 == schedule.iterations;
    std::vector<size_t> end(size_t(schedule.workers));
    for (int w = 0; w < schedule.workers; ++w) {
      const auto& list = schedule.actions.at(size_t(w));
      end[size_t(w)] = last ? list.size() : ends[size_t(w)][size_t(it)];
      if (!overlap || last) continue;
      const int produced = list.at(end[size_t(w)] - 1).version;
      while (end[size_t(w)] < list.size() && list[end[size_t(w)]].iteration == it + 1 &&
             !needs_update_done(list[end[size_t(w)]], produced)) {
        ++end[size_t(w)];
      }
    }
    // Shrink each run-on to before its first receive whose send the sender runs later.
    for (bool shrunk = overlap && !last; shrunk;) {
      shrunk = false;
      for (int w = 0; w < schedule.workers; ++w) {
        const auto& list = schedule.actions.at(size_t(w));
        for (size_t i = ends[size_t(w)][size_t(it)]; i < end[size_t(w)]; ++i) {
          if (!is_recv(list[i].kind) || sender_position(sends, schedule, w, list[i]) < end[size_t(list[i].peer)]) continue;
          end[size_t(w)] = i;
          shrunk = true;
          break;
        }
      }
    }
    for (int w = 0; w < schedule.workers; ++w) {
      bounds[size_t(w)].push_back({begin[size_t(w)], end[size_t(w)]});
      begin[size_t(w)] = end[size_t(w)];
    }
  }
  return bounds;
}

}  // namespace pipetrain::schedule
