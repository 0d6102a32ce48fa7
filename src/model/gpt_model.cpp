#include "model/gpt_model.h"

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
  config.dtype = compute_dtype(model);
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
  return {{rows, config_.seq_len, config_.d_model}, config_.dtype};
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
LayerWork GptModel::layer_work(int64_t layer, int64_t rows) const {
  const double b = double(rows), s = double(config_.seq_len), h = double(config_.d_model);
  const double v = double(config_.vocab_size);
  LayerWork work;
  work.output_values = b * s * h;
  if (layer == 0) {
    work.parameters = v * h + s * h;
  } else if (layer == config_.layer_count() - 1) {
    work.forward_flops = 2 * b * s * h * v;
    work.parameters = 2 * h;  // the final norm; the tied weight is the embedding's
    work.output_values = b * s * v;
  } else {
    work.forward_flops = 24 * b * s * h * h + 4 * b * s * s * h;
    work.parameters = 12 * h * h + 13 * h;
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
