#pragma once
// A no-flush schedule resumed at `first_step`, as the runtime used to make it: every worker's list
// cut to the actions of iterations >= first_step (matched send/recv pairs go together).
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

inline Schedule cut_to(Schedule s, int first_step) {
  for (auto& list : s.actions) {
    std::vector<Action> kept;
    for (const auto& a : list) if (a.iteration >= first_step) kept.push_back(a);
    list = kept;
  }
  return s;
}

}  // namespace pipetrain::schedule
