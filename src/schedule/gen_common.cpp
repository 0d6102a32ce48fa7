#include "schedule/gen_common.h"

#include <algorithm>

namespace pipetrain::schedule::detail {

Schedule make_header(const ScheduleSpec& spec, const char* name, WeightPolicyKind policy) {
  Schedule s;
  s.name = name;
  s.workers = spec.stages;
  s.chunks = spec.chunks;
  s.microbatches = spec.microbatches;
  s.slices = spec.slices;
  s.iterations = spec.iterations;
  s.dp_width = spec.dp_width;
  s.policy.kind = policy;
  return s;
}

ComputeOrder repeat_iterations(const ComputeOrder& one, int iterations) {
  ComputeOrder all(one.size());
  for (size_t w = 0; w < one.size(); ++w) {
    for (int it = 0; it < iterations; ++it) {
      for (ComputeItem item : one[w]) {
        item.iteration = it;
        all[w].push_back(item);
      }
    }
  }
  return all;
}

std::vector<ComputeItem> one_f_one_b(int w, int p, int count, int per_iteration) {
  auto item = [&](ActionKind kind, int gmb) {
    return ComputeItem{kind, gmb / per_iteration, gmb % per_iteration, 0, 0};
  };
  std::vector<ComputeItem> order;
  int warmup = std::min(p - w - 1, count);
  for (int j = 0; j < warmup; ++j) order.push_back(item(ActionKind::Forward, j));
  for (int j = 0; j + warmup < count; ++j) {
    order.push_back(item(ActionKind::Forward, j + warmup));
    order.push_back(item(ActionKind::Backward, j));
  }
  for (int j = std::max(0, count - warmup); j < count; ++j)
    order.push_back(item(ActionKind::Backward, j));
  return order;
}

}  // namespace pipetrain::schedule::detail
