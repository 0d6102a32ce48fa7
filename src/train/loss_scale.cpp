#include "train/loss_scale.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace pipetrain {

LossScale::LossScale(const device::Precision& precision, const TrainConfig& train)
    : active_(precision.scales_loss()), growth_interval_(train.loss_scale_growth_interval) {
  // A power of two: scaling and unscaling are then exact (short of overflow).
  if (active_) state_.scale = state_.previous_scale = std::exp2(std::round(std::log2(train.loss_scale)));
}

double LossScale::scale_at(int64_t version) const {
  if (!active_) return 1;
  if (version == decisions_) return state_.scale;
  if (version == decisions_ - 1) return state_.previous_scale;
  throw std::logic_error("loss scale of weight version " + std::to_string(version) + " asked after " +
                         std::to_string(decisions_) + " decisions: only the last two are kept");
}

bool LossScale::record(double scaled_norm) {
  if (!active_) return true;
  state_.previous_scale = state_.scale;
  ++decisions_;
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

void LossScale::restore(const LossScaleState& state, int64_t decisions) {
  state_ = state;
  decisions_ = decisions;
}

}  // namespace pipetrain
