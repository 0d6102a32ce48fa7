#pragma once
// Dynamic loss scaling for float16 mixed precision, as torch.amp.GradScaler does it: the loss is
// multiplied by `scale` (a power of two, so exactly) before the backward, so gradients too small
// for float16 survive; the update divides it out again. A step whose gradients overflowed (a
// non-finite global norm, which every pipeline worker reads alike after the norm's all-reduce)
// is skipped and halves the scale; `growth_interval` good steps in a row double it. Every other
// precision: scale 1, nothing skipped.
#include <cstdint>

#include "core/config.h"
#include "device/precision.h"

namespace pipetrain {

struct LossScaleState {
  double scale = 1;
  int64_t good_steps = 0;     // finite steps since the last change
  int64_t applied_steps = 0;  // updates made (0: the optimizer has no state yet)
};

class LossScale {
 public:
  LossScale(const device::Precision& precision, const TrainConfig& train);
  bool active() const { return active_; }
  double factor() const { return state_.scale; }  // multiply the loss by it
  // The step's global norm of the scaled gradients: true when the update applies (finite), and
  // the scale moves on.
  bool record(double scaled_norm);
  const LossScaleState& state() const { return state_; }
  void restore(const LossScaleState& state) { state_ = state; }

 private:
  bool active_ = false;
  int64_t growth_interval_ = 1;
  LossScaleState state_;
};

}  // namespace pipetrain
