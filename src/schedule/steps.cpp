#include "schedule/steps.h"

#include "schedule/catalogue.h"

namespace pipetrain::schedule {
bool needs_update_done(const Action& action, int produced_version) {
  return action.kind == ActionKind::OptimizerStep ||
         (is_compute(action.kind) && action.version >= produced_version);
}

bool posts_replica_sums(const Schedule& schedule) { return !flushes(schedule.policy.kind); }

StepBounds step_bounds(const Schedule& schedule, int worker, int first_step) {
  const auto& list = schedule.actions.at(size_t(worker));
  std::vector<size_t> update_end(size_t(schedule.iterations), 0);  // after each iteration's last update
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].kind == ActionKind::OptimizerStep) update_end.at(size_t(list[i].iteration)) = i + 1;
  }
  StepBounds bounds(size_t(first_step), {0, 0});
  size_t begin = 0;
  for (int it = first_step; it < schedule.iterations; ++it) {
    size_t end = it + 1 == schedule.iterations ? list.size() : update_end[size_t(it)];
    if (!flushes(schedule.policy.kind) && end < list.size()) {
      const int produced = list.at(end - 1).version;
      while (end < list.size() && list[end].iteration == it + 1 && !needs_update_done(list[end], produced)) ++end;
      // A receive feeds the compute after it: one for a compute that reads the new version
      // belongs to the next step (after a flush its sender runs that step too).
      while (end > update_end[size_t(it)] && is_recv(list[end - 1].kind)) --end;
    }
    bounds.push_back({begin, end});
    begin = end;
  }
  return bounds;
}

}  // namespace pipetrain::schedule
