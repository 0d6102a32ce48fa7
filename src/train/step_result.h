#pragma once
// What one optimizer step reports, from the single-process trainers and from every pipeline
// worker alike.

namespace pipetrain {

struct StepResult {
  double loss = 0;       // mean over the batch's tokens
  double grad_norm = 0;  // before clipping
  double lr = 0;
};

}  // namespace pipetrain
