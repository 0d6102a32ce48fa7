#include "train/loss_scale.h"

#include <algorithm>
#include <cmath>

namespace pipetrain {

LossScale::LossScale(const device::Precision& precision, const TrainConfig& train)
    : active_(precision.scales_loss()), growth_interval_(train.loss_scale_growth_interval) {
  // A power of two: scaling and unscaling are then exact (short of overflow).
  if (active_) state_.scale = std::exp2(std::round(std::log2(train.loss_scale)));
}

bool LossScale::record(double scaled_norm) {
  if (!active_) return true;
  if (!std::isfinite(scaled_norm)) {
    state_.scale = std::max(1.0, state_.scale / 2);
    state_.good_steps = 0;
    return false;
  }
  ++state_.applied_steps;
  if (++state_.good_steps >= growth_interval_) {
    state_.scale *= 2;
    state_.good_steps = 0;
  }
  return true;
}

}  // namespace pipetrain
