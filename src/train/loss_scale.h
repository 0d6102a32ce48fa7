#pragma once
// Dynamic loss scaling for float16 mixed precision, as torch.amp.GradScaler does it: the loss is
// multiplied by `scale` (a power of two, so exactly) before the backward, so gradients too small
// for float16 survive; the update divides it out again. A step whose gradients overflowed (a
// non-finite global norm, which every pipeline worker reads alike after the norm's all-reduce)
// is skipped and halves the scale; `growth_interval` good steps in a row double it. Every other
// precision: scale 1, nothing skipped.
//
// Each weight version has its scale: the one after as many decisions (updates, applied or
// skipped) as the version has updates. A microbatch's loss is scaled by the scale of the version
// its forward reads on the last stage, and its update divides out the same one. Flushing
// schedules read the latest version, so that is the current scale; a no-flush schedule's last
// stage may read one update behind (2BW), so the scale one decision earlier is kept too. There an
// overflow is met twice (the update after it ran at the old scale too) and halves the scale
// twice: one halving more than a flush would make, which growth undoes, where waiting for the
// lagged update would double the skipped updates while a too-large initial scale comes down.
#include <cstdint>

#include "core/config.h"
#include "device/precision.h"

namespace pipetrain {

struct LossScaleState {
  double scale = 1;
  int64_t good_steps = 0;     // finite steps since the last change
  int64_t applied_steps = 0;  // updates made (0: the optimizer has no state yet)
  double previous_scale = 1;  // the scale one decision earlier (= scale before any)
};

class LossScale {
 public:
  LossScale(const device::Precision& precision, const TrainConfig& train);
  bool active() const { return active_; }
  double factor() const { return state_.scale; }  // the current scale
  // The scale of weight version `version` (the scale after that many decisions): the current
  // one or the one before (std::logic_error for others; 1 when inactive).
  double scale_at(int64_t version) const;
  // An update's global norm of its loss-scaled gradients: true when the update applies
  // (finite), and the scale moves on.
  bool record(double scaled_norm);
  const LossScaleState& state() const { return state_; }
  // A checkpoint's state, taken after `decisions` updates.
  void restore(const LossScaleState& state, int64_t decisions);

 private:
  bool active_ = false;
  int64_t growth_interval_ = 1;
  int64_t decisions_ = 0;
  LossScaleState state_;
};

}  // namespace pipetrain
