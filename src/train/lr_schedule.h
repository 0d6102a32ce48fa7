#pragma once
#include <cstdint>

#include "core/config.h"

namespace pipetrain {

// Linear warm-up from lr/warmup to lr over `warmup_steps`, then cosine decay to `min_lr` at the
// last step. `step` is 0-based.
double learning_rate_at(const TrainConfig& train, int64_t step);

}  // namespace pipetrain
