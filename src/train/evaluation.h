#pragma once
// Validation, as the single-process trainer and the pipeline's last stage both run it: the
// model in eval mode (BatchNorm reads its running statistics and leaves them alone), the loss
// and the model's own measures (StageModule::validation_measures) averaged over equal batches.
#include <cstdint>

#include <torch/torch.h>

#include "model/model.h"
#include "train/step_result.h"

namespace pipetrain {

// The module in eval mode for a scope, back in its earlier mode after it.
class EvalMode {
 public:
  explicit EvalMode(torch::nn::Module& module) : module_(module), was_training_(module.is_training()) {
    module_.eval();
  }
  ~EvalMode() { module_.train(was_training_); }
  EvalMode(const EvalMode&) = delete;
  EvalMode& operator=(const EvalMode&) = delete;

 private:
  torch::nn::Module& module_;
  bool was_training_;
};

// Sums of a last stage's loss and measures over validation batches of one size.
class MeasureMeans {
 public:
  void add(StageModule& last, const torch::Tensor& output, const torch::Tensor& labels) {
    loss_sum_ += last.loss(output, labels).item<double>();
    const Measures measures = last.validation_measures(output, labels);
    if (batches_ == 0) sums_ = measures;
    for (size_t i = 0; i < measures.size() && batches_ > 0; ++i) sums_.at(i).second += measures[i].second;
    ++batches_;
  }
  Validation result() const {
    Validation validation;
    validation.loss = loss_sum_ / double(batches_);
    for (const auto& [name, sum] : sums_) validation.measures.emplace_back(name, sum / double(batches_));
    return validation;
  }

 private:
  int64_t batches_ = 0;
  double loss_sum_ = 0;
  Measures sums_;
};

}  // namespace pipetrain
