#include "schedule/steps.h"

#include <map>
#include <tuple>

#include "schedule/catalogue.h"

namespace pipetrain::schedule {
namespace {

// One worker's steps on its own, and where each step's run-on begins (after its last update).
struct OwnSteps {
  StepBounds bounds;
  std::vector<size_t> run_on_begin;
};

// A step ends after the worker's last update of its iteration; a no-flush step runs on into the
// next iteration until an action needs that update (or the receive that feeds it).
OwnSteps own_steps(const Schedule& schedule, int worker, int first_step) {
  const auto& list = schedule.actions.at(size_t(worker));
  std::vector<size_t> update_end(size_t(schedule.iterations), 0);  // after each iteration's last update
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind == ActionKind::OptimizerStep) update_end.at(size_t(list[i].iteration)) = i + 1;
  }
  OwnSteps steps{StepBounds(size_t(first_step), {0, 0}), std::vector<size_t>(size_t(first_step), 0)};
  size_t begin = 0;
  for (int it = first_step; it < schedule.iterations; ++it) {
    size_t end = it + 1 == schedule.iterations ? list.size() : update_end[size_t(it)];
    steps.run_on_begin.push_back(end);
    if (!flushes(schedule.policy.kind) && end < list.size()) {
      const int produced = list.at(end - 1).version;
      while (end < list.size() && list[end].iteration == it + 1 && !needs_update_done(list[end], produced)) ++end;
      // A receive feeds the compute after it: one for a compute that reads the new version
      // belongs to the next step (after a flush its sender runs that step too).
      while (end > update_end[size_t(it)] && is_recv(list[end - 1].kind)) --end;
    }
    steps.bounds.push_back({begin, end});
    begin = end;
  }
  return steps;
}

// A message: (gradient?, stage boundary, iteration, microbatch, slice); boundary b lies between
// stages b and b+1.
using Message = std::tuple<bool, int, int, int, int>;

Message message_of(const Schedule& schedule, int worker, const Action& a) {
  const int stage = schedule.stage_of(worker, a);
  const bool gradient = a.kind == ActionKind::SendGrad || a.kind == ActionKind::RecvGrad;
  const int boundary = a.kind == ActionKind::SendGrad || a.kind == ActionKind::RecvActivation ? stage - 1 : stage;
  return {gradient, boundary, a.iteration, a.microbatch, a.slice};
}

// Ends every run-on at its first receive whose send lies in the peer's later step; returns whether
// any did. (Cutting a run-on moves its sends later: the caller repeats until nothing changes.)
bool cut_run_ons_waiting_for_later_steps(const Schedule& schedule, std::vector<OwnSteps>& steps) {
  std::map<Message, size_t> sent_in;  // message -> step of its send
  for (int w = 0; w < schedule.workers; ++w) {
    const auto& list = schedule.actions.at(size_t(w));
    const auto& bounds = steps.at(size_t(w)).bounds;
    for (size_t k = 0; k < bounds.size(); ++k) {
      for (size_t i = bounds[k].first; i < bounds[k].second; ++i) {
        if (is_send(list[i].kind)) sent_in[message_of(schedule, w, list[i])] = k;
      }
    }
  }
  bool cut = false;
  for (int w = 0; w < schedule.workers; ++w) {
    const auto& list = schedule.actions.at(size_t(w));
    auto& [bounds, run_on_begin] = steps.at(size_t(w));
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      for (size_t i = run_on_begin[k]; i < bounds[k].second; ++i) {
        if (!is_recv(list[i].kind)) continue;
        const auto send = sent_in.find(message_of(schedule, w, list[i]));
        if (send == sent_in.end() || send->second <= k) continue;
        size_t end = i;
        while (end > run_on_begin[k] && is_recv(list[end - 1].kind)) --end;  // as own_steps
        bounds[k].second = bounds[k + 1].first = end;
        cut = true;
        break;
      }
    }
  }
  return cut;
}

}  // namespace

bool needs_update_done(const Action& action, int produced_version) {
  return action.kind == ActionKind::OptimizerStep ||
         (is_compute(action.kind) && action.version >= produced_version);
}

bool posts_replica_sums(const Schedule& schedule) { return !flushes(schedule.policy.kind); }

std::vector<StepBounds> step_bounds(const Schedule& schedule, int first_step) {
  std::vector<OwnSteps> steps;
  for (int w = 0; w < schedule.workers; ++w) steps.push_back(own_steps(schedule, w, first_step));
  if (!flushes(schedule.policy.kind)) {
    while (cut_run_ons_waiting_for_later_steps(schedule, steps)) {
    }
  }
  std::vector<StepBounds> bounds;
  for (auto& worker : steps) bounds.push_back(std::move(worker.bounds));
  return bounds;
}

StepBounds step_bounds(const Schedule& schedule, int worker, int first_step) {
  return step_bounds(schedule, first_step).at(size_t(worker));
}

}  // namespace pipetrain::schedule
