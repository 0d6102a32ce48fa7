#include "train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace pipetrain {

double learning_rate_at(const TrainConfig& train, int64_t step) {
  if (step < train.warmup_steps) {
    return train.lr * static_cast<double>(step + 1) / static_cast<double>(train.warmup_steps);
  }
  const int64_t decay_steps = std::max<int64_t>(1, train.steps - 1 - train.warmup_steps);
  const double progress =
      std::min(1.0, static_cast<double>(step - train.warmup_steps) / static_cast<double>(decay_steps));
  return train.min_lr + 0.5 * (train.lr - train.min_lr) * (1.0 + std::cos(M_PI * progress));
}

}  // namespace pipetrain
