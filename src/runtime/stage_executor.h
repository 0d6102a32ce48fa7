#pragma once
// Runs one pipeline stage: interprets this worker's actions of a synchronous Schedule
// (forward, backward, send/recv of activations and gradients, optimizer step) on real tensors.
#include <map>
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "data/text_dataset.h"
#include "model/gpt.h"
#include "runtime/comm.h"
#include "runtime/partition.h"
#include "schedule/schedule.h"
#include "sim/timeline.h"
#include "train/trainer.h"

namespace pipetrain::runtime {

class StageExecutor {
 public:
  // `data` is null on middle stages: only the first stage reads inputs, the last targets.
  StageExecutor(const Config& config, const TextDataset* data, Comm& comm,
                const std::vector<StageRange>& ranges, schedule::Schedule schedule);
  // One optimizer step. loss is the batch mean on the last stage, NaN elsewhere; grad_norm
  // (global, before clipping) and lr are the same on every stage.
  StepResult train_step(int64_t step);
  double evaluate();  // mean validation loss on the last stage, NaN elsewhere

  GptStack& model() { return *model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  bool first() const { return stage_ == 0; }
  bool last() const { return stage_ == stages_ - 1; }
  // Every action of the first `traced_steps` steps with wall-clock start and duration (ms on
  // the machine's monotonic clock, shared by all processes on it): the real-run timeline.
  const std::vector<sim::TimedEvent>& events() const { return events_; }
  static constexpr int64_t traced_steps = 20;

 private:
  // What the stage holds for one in-flight microbatch, dropped once its backward is done.
  struct InFlight {
    torch::Tensor input;        // received activation (leaf with requires_grad), or tokens
    torch::Tensor output;       // stage output kept for the backward (not on the last stage)
    torch::Tensor scaled_loss;  // last stage: loss / m
    torch::Tensor output_grad;  // received gradient w.r.t. output
  };
  void run_action(const schedule::Action& action, const TokenBatch& batch);
  void forward(int microbatch, const TokenBatch& batch);
  void backward(int microbatch);
  void optimizer_step();
  std::vector<int64_t> activation_shape(int64_t rows) const;

  Config config_;
  const TextDataset* data_;
  Comm& comm_;
  int stage_, stages_;
  schedule::Schedule schedule_;
  std::shared_ptr<GptStack> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  torch::Tensor tied_weight_;                // embedding on the first, head copy on the last
  std::vector<torch::Tensor> norm_params_;   // parameters counted in the global norm
  std::map<int, InFlight> in_flight_;
  double loss_sum_ = 0;
  int64_t current_step_ = 0;
  std::vector<sim::TimedEvent> events_;
  StepResult result_;
};

}  // namespace pipetrain::runtime
