#pragma once
// The single-process trainer: the reference every pipelined run is compared against.
// One step = the global batch split into equal microbatches, each microbatch's mean loss scaled
// by 1/m and back-propagated (gradient accumulation), global-norm clipping, then one update.
#include <memory>

#include <torch/torch.h>

#include "core/config.h"
#include "data/text_dataset.h"
#include "model/gpt.h"

namespace pipetrain {

struct StepResult {
  double loss = 0;       // mean over the batch's tokens
  double grad_norm = 0;  // before clipping
  double lr = 0;
};

GptConfig gpt_config_from(const ModelConfig& model);
// model.dtype as a tensor type: the dtype of the weights and of every float tensor derived from
// them (activations, gradients and the buffers that receive them, optimizer state).
torch::ScalarType compute_dtype(const ModelConfig& model);
torch::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols);

// The head + loss of a stack that ends with the head, as model.loss_chunk_tokens says:
// 0: the stack returns the logits [B, T, V] and lm_loss takes their cross-entropy;
// > 0: the stack returns the head's normalised input [B, T, D] and chunked cross-entropy applies
// the head's weight (the tied embedding, or the last stage's copy of it) chunk by chunk, never
// holding more than loss_chunk_tokens x V logits. Same loss and gradients either way.
HeadOutput head_output_of(const ModelConfig& model);
torch::Tensor head_loss(const GptStack& model, const torch::Tensor& output,
                        const torch::Tensor& targets, const ModelConfig& config);

class Trainer {
 public:
  Trainer(const Config& config, const Dataset& data);
  StepResult train_step(int64_t step);
  double evaluate();  // mean validation loss over eval.batches fixed batches

  GptStack& model() { return *model_; }
  torch::optim::Optimizer& optimizer() { return *optimizer_; }
  std::vector<torch::Tensor> parameters() { return model_->parameters(); }

 private:
  Config config_;
  const Dataset& data_;
  std::shared_ptr<GptStack> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace pipetrain
