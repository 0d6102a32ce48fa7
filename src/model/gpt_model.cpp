#include "model/gpt_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/registry.h"

namespace pipetrain {

GptConfig gpt_config_from(const ModelConfig& model) {
  GptConfig config;
  config.vocab_size = model.vocab_size;
  config.d_model = model.d_model;
  config.heads = model.heads;
  config.layers = model.layers;
  config.seq_len = model.seq_len;
  config.precision = model_precision(model);
  config.dtype = config.precision.parameter_dtype();
  config.loss_chunk_tokens = model.loss_chunk_tokens;
  return config;
}

std::string GptModel::describe() const {
  return fmt::format("GPT {} layers, d_model {}", config_.layers, config_.d_model);
}

std::string GptModel::layer_name(int64_t layer) const {
  if (layer == 0) return "embedding";
  if (layer == config_.layer_count() - 1) return "head";
  return fmt::format("block{}", layer - 1);
}

std::shared_ptr<StageModule> GptModel::make_stage(int64_t first, int64_t last) const {
  return std::make_shared<GptStack>(config_, seed_, first, last);
}

TensorSpec GptModel::input_spec(int64_t rows) const {
  return {{rows, config_.seq_len}, torch::kInt64};
}

TensorSpec GptModel::boundary_spec(int64_t, int64_t rows) const {
  return {{rows, config_.seq_len, config_.d_model}, config_.precision.activation_dtype()};
}

std::vector<SharedParameter> GptModel::shared_parameters() const {
  const int64_t head = config_.layer_count() - 1;
  return {{{{0, "layer0.token_weight"}, {head, fmt::format("layer{}.tied_weight", head)}}}};
}

ParameterRole GptModel::role_of(const std::string& parameter, const std::vector<int64_t>&) const {
  return parameter_role(parameter);
}

// Forward FLOPs as plan/analytic.h counts them: a block's four matmuls (24 b s h^2) plus scores
// and mixing (4 b s^2 h); the head's logits (2 b s h V); the embedding a lookup.
// Stashed values as libtorch's autograd keeps them (checked against the counting allocator:
// GptMemory.* in tests/model): N = rows x seq_len tokens, D wide, H heads, T = seq_len.
LayerWork GptModel::layer_work(int64_t layer, int64_t rows) const {
  const double b = double(rows), s = double(config_.seq_len), h = double(config_.d_model);
  const double v = double(config_.vocab_size), n = b * s, heads = double(config_.heads);
  // Memory in values of the activation dtype. Mixed precision (measured, GptLayerMemory.bfloat16_*):
  // a float32 tensor counts two bfloat16 values (`wide`), and autocast's bfloat16 copy of a
  // matrix weight stays with the microbatch for its backward.
  const bool mixed = config_.precision.mixed();
  const double wide = mixed ? 2 : 1;
  LayerWork work;
  work.output_values = n * h;
  work.stashed_values = n * h;  // every layer's output
  if (layer == 0) {
    work.parameters = v * h + s * h;
    work.largest_parameter_values = v * h;
    // Backward: the dense (float32) gradients of the token and position weights, and the
    // incoming one (mixed: and its float32 copy).
    work.workspace_values = wide * (v * h + s * h + n * h) + (mixed ? n * h : 0);
  } else if (layer == config_.layer_count() - 1) {
    work.parameters = 2 * h;  // the final norm; the tied weight is the embedding's
    work.shared_values = v * h;
    work.shared_with = 0;
    work.largest_parameter_values = v * h;  // the tied weight, here or on the embedding's stage
    work.stashed_values += wide * 2 * n;  // the norm's mean and 1/std (float32)
    if (config_.loss_chunk_tokens > 0) {
      // Chunked cross-entropy keeps one log-sum-exp per token. Forward: a chunk's logits and
      // logsumexp's shifted copy of them; backward: a chunk's logits turned into their
      // gradient, and the gradients of the head weight and the hidden states.
      const double chunk = std::min(n, double(config_.loss_chunk_tokens));
      work.forward_flops = 2 * n * h * v;
      work.output_values = n * v;  // computed a chunk at a time: the same work
      // Mixed: it runs in float32 on a float32 copy of the hidden states (GptStack::loss).
      work.stashed_values = wide * (n * h + 2 * n + 3.25 * n);  // the log-sum-exps, the targets
      work.workspace_values = wide * std::max(2 * chunk * v, chunk * v + v * h + n * h);
    } else {
      // cross_entropy keeps log_softmax's output; the logits, then the gradients of both, are
      // transient.
      work.forward_flops = 2 * n * h * v;
      work.output_values = n * v;
      // Mixed: log_softmax's output is float32, and the logits' product keeps the bfloat16
      // copy of the tied weight.
      work.stashed_values += wide * n * v + (mixed ? v * h : 0);
      work.workspace_values = wide * 2 * n * v;
    }
  } else {
    work.forward_flops = 24 * n * h * h + 4 * b * s * s * h;
    work.parameters = 12 * h * h + 13 * h;
    work.largest_parameter_values = 4 * h * h;  // fc and fc_out
    // ln1 out, q/k/v copies (3), the mixed heads' copy, the residual, ln2 out, fc out (4),
    // gelu out (4), the output: 16 N D; the norms' statistics (4 N); the attention's
    // log-sum-exps, one per head and query (at::scaled_dot_product_attention keeps no [T, T]
    // probabilities).
    // Mixed: the norms' statistics and log-sum-exps are float32, and the matrices' bfloat16
    // copies (12 D^2; not the biases) stay for the backward.
    work.stashed_values = 16 * n * h + wide * (4 * n + b * heads * s) + (mixed ? 12 * h * h : 0);
    // Backward peaks in the MLP: the fc's input gradient (4 N D) and weight gradient (4 D^2)
    // beside the incoming gradient (N D). The fused attention's backward works in blocks.
    // Mixed (measured): the larger of 12 N D - 4 D^2 (the MLP's backward, the weight copies
    // read so far freed) and N D + 8 D^2 (its start: fc_out's float32 weight gradient).
    work.workspace_values = mixed ? std::max(12 * n * h - 4 * h * h, n * h + 8 * h * h)
                                  : 5 * n * h + 4 * h * h;
  }
  return work;
}

Microbatch GptModel::example(int64_t rows, torch::Generator& generator) const {
  const auto tokens = [&] {
    return torch::randint(0, config_.vocab_size, {rows, config_.seq_len}, generator,
                          torch::kInt64);
  };
  return {tokens(), tokens()};
}

}  // namespace pipetrain
