#pragma once
// What one optimizer step reports, from the single-process trainers and from every pipeline
// worker alike.
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace pipetrain {

// Named means of a validation beside its loss (StageModule::validation_measures: a
// classifier's accuracy), in the model's order.
using Measures = std::vector<std::pair<std::string, double>>;

// What one validation reports (NaN loss and no measures on workers without the last stage).
struct Validation {
  double loss = std::numeric_limits<double>::quiet_NaN();
  Measures measures;
  bool cut_short = false;  // a stop ended it before eval.batches: a mean of fewer, not recorded
};

struct StepResult {
  double loss = 0;       // mean over the batch's tokens
  double grad_norm = 0;  // before clipping
  double lr = 0;
  // model.dtype float16 (train/loss_scale.h): the loss scale this step ran with (0: none), and
  // whether its gradients overflowed, so the update was skipped.
  double loss_scale = 0;
  bool skipped = false;
};

}  // namespace pipetrain
