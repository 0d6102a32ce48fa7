#pragma once
// Shared pieces of the generators (internal to src/schedule).
#include "schedule/generators.h"
#include "schedule/lower.h"

namespace pipetrain::schedule::detail {

// Metadata of a schedule (no actions yet).
Schedule make_header(const ScheduleSpec& spec, const char* name, WeightPolicyKind policy);

// Copies one iteration's compute order for every iteration (flush schedules).
ComputeOrder repeat_iterations(const ComputeOrder& one, int iterations);

// Classic 1F1B order over `count` microbatches for worker `w` of `p` (one chunk):
// min(p-w-1, count) warm-up forwards, then forward/backward pairs, then the remaining backwards.
std::vector<ComputeItem> one_f_one_b(int w, int p, int count, int microbatches_per_iteration);

}  // namespace pipetrain::schedule::detail
