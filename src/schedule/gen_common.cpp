#include "schedule/gen_common.h"

#include <algorithm>

#include "core/error.h"

namespace pipetrain::schedule::detail {

void check_spec(const ScheduleSpec& spec, Allowed allowed) {
  const char* name = spec.name.c_str();
  if (spec.stages < 1) fail("schedule {}: stages must be >= 1 (got {})", name, spec.stages);
  if (spec.microbatches < 1)
    fail("schedule {}: microbatches must be >= 1 (got {})", name, spec.microbatches);
  if (spec.iterations < 1)
    fail("schedule {}: iterations must be >= 1 (got {})", name, spec.iterations);
  if (spec.dp_width < 1) fail("schedule {}: dp-width must be >= 1 (got {})", name, spec.dp_width);
  if (spec.chunks < 1) fail("schedule {}: chunks must be >= 1 (got {})", name, spec.chunks);
  if (spec.slices < 1) fail("schedule {}: slices must be >= 1 (got {})", name, spec.slices);
  if (spec.chunks > 1 && !allowed.chunks)
    fail("schedule {}: takes one chunk per worker (got --chunks {}); use interleaved or bfs", name,
         spec.chunks);
  if (spec.slices > 1 && !allowed.slices)
    fail("schedule {}: token slices are only supported by gpipe (got --slices {})", name,
         spec.slices);
  // Keeps the value sizes sane: these lists are simulated and drawn.
  long long actions = 1LL * spec.stages * spec.chunks * spec.microbatches * spec.slices *
                      spec.iterations;
  if (actions > 2'000'000)
    fail("schedule {}: {} compute actions is too many to simulate", name, actions);
}

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
