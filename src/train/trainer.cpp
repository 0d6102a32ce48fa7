#include "train/trainer.h"

#include <cmath>

#include "core/error.h"
#include "loss/chunked_cross_entropy.h"
#include "train/lr_schedule.h"
#include "train/optim.h"

namespace pipetrain {

GptConfig gpt_config_from(const ModelConfig& model) {
  GptConfig config;
  config.vocab_size = model.vocab_size;
  config.d_model = model.d_model;
  config.heads = model.heads;
  config.layers = model.layers;
  config.seq_len = model.seq_len;
  config.dtype = compute_dtype(model);
  return config;
}

torch::ScalarType compute_dtype(const ModelConfig& model) {
  if (model.dtype == "float32") return torch::kFloat32;
  if (model.dtype == "float64") return torch::kFloat64;
  fail("model.dtype must be one of float32, float64, got '{}'", model.dtype);
}

torch::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  return torch::tensor(values, torch::kInt64).view({rows, cols});
}

HeadOutput head_output_of(const ModelConfig& model) {
  return model.loss_chunk_tokens > 0 ? HeadOutput::Hidden : HeadOutput::Logits;
}

torch::Tensor head_loss(const GptStack& model, const torch::Tensor& output,
                        const torch::Tensor& targets, const ModelConfig& config) {
  if (config.loss_chunk_tokens <= 0) return lm_loss(output, targets);
  loss::ChunkedCrossEntropyOptions options;
  options.chunk_tokens = config.loss_chunk_tokens;
  return loss::chunked_cross_entropy(output.reshape({-1, output.size(-1)}), model.head_weight(),
                                     targets.reshape({-1}), options);
}

Trainer::Trainer(const Config& config, const Dataset& data)
    : config_(config),
      data_(data),
      model_(make_gpt(gpt_config_from(config.model), static_cast<uint64_t>(config.train.seed))),
      optimizer_(make_optimizer(named_tensors(*model_), config.train)) {}

StepResult Trainer::train_step(int64_t step) {
  const auto& train = config_.train;
  const TokenBatch batch =
      data_.train_batch(static_cast<uint64_t>(train.seed), step, train.batch_size);
  const int64_t micro_size = train.batch_size / train.microbatches;
  optimizer_->zero_grad();
  double loss_sum = 0;
  for (int64_t m = 0; m < train.microbatches; ++m) {
    const TokenBatch micro = batch.rows(m * micro_size, micro_size);
    auto output = model_->forward(to_tensor(micro.inputs, micro_size, micro.seq_len),
                                  head_output_of(config_.model));
    auto loss = head_loss(*model_, output, to_tensor(micro.targets, micro_size, micro.seq_len),
                          config_.model);
    (loss / static_cast<double>(train.microbatches)).backward();
    loss_sum += loss.item<double>();
  }
  StepResult result;
  result.loss = loss_sum / static_cast<double>(train.microbatches);
  const auto params = parameters();
  result.grad_norm = std::sqrt(squared_grad_norm(params));
  scale_grads_to_norm(params, result.grad_norm, train.grad_clip);
  result.lr = learning_rate_at(train, step);
  set_learning_rate(*optimizer_, result.lr);
  optimizer_->step();
  return result;
}

double Trainer::evaluate() {
  torch::NoGradGuard no_grad;
  const int64_t batch_size = config_.train.batch_size;
  double total = 0;
  for (int64_t i = 0; i < config_.eval.batches; ++i) {
    const TokenBatch batch = data_.val_batch(i, batch_size);
    auto output = model_->forward(to_tensor(batch.inputs, batch_size, batch.seq_len),
                                  head_output_of(config_.model));
    total += head_loss(*model_, output, to_tensor(batch.targets, batch_size, batch.seq_len),
                       config_.model)
                 .item<double>();
  }
  return total / static_cast<double>(config_.eval.batches);
}

}  // namespace pipetrain
