#include "schedule/staleness.h"

#include <algorithm>
#include <map>

#include "schedule/lower.h"

namespace pipetrain::schedule {

void derive_staleness(Schedule& s) {
  const int S = s.stages();
  std::vector<int> forward(S, 0), backward(S, 0);
  std::map<std::pair<int, int>, int> forward_version;  // (stage, gmb) -> version read
  std::map<std::pair<int, int>, double> backward_end;  // (stage, gmb) -> end in slots
  std::vector<std::vector<std::pair<int, double>>> steps(S);  // per stage: (gmb, end)

  auto slots = dataflow_times(s, [](const Action& a) {
    return a.kind == ActionKind::Forward || a.kind == ActionKind::Backward ||
                   a.kind == ActionKind::BackwardInput
               ? 1.0
               : 0.0;
  });
  for (int w = 0; w < s.workers; ++w) {
    for (size_t k = 0; k < s.actions[w].size(); ++k) {
      const Action& a = s.actions[w][k];
      int stage = s.stage_of(w, a), gmb = s.global_microbatch(a);
      if (a.kind == ActionKind::Forward && a.slice == 0) forward_version[{stage, gmb}] = a.version;
      if (a.kind == ActionKind::OptimizerStep) steps[stage].push_back({gmb, slots[w][k].end});
      if (a.kind == ActionKind::Backward || a.kind == ActionKind::BackwardInput) {
        backward_end[{stage, gmb}] = slots[w][k].end;
        auto f = forward_version.find({stage, gmb});
        if (f != forward_version.end()) forward[stage] = std::max(forward[stage], a.version - f->second);
      }
    }
  }
  if (s.policy.predict_backward) {
    for (const auto& [key, end] : backward_end) {
      auto [stage, gmb] = key;
      auto done = backward_end.find({0, gmb});
      if (done == backward_end.end()) continue;
      int later = 0;
      for (const auto& [step_gmb, step_end] : steps[stage])
        if (step_gmb > gmb && step_end > end && step_end <= done->second + 1e-9) ++later;
      backward[stage] = std::max(backward[stage], later);
    }
  }
  for (int st = 0; st < S; ++st) forward[st] += backward[st];
  s.policy.forward_staleness = forward;
  s.policy.backward_staleness = backward;
}

}  // namespace pipetrain::schedule
