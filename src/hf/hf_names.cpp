#include "hf/hf_names.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pipetrain::hf {
namespace {

std::vector<TensorName> gpt2_layer(const ModelConfig& model, int64_t layer, const std::string& t) {
  const std::string ours = fmt::format("layer{}.", layer);
  if (layer == 0) {
    return {{ours + "token_weight", t + "wte.weight"}, {ours + "position_weight", t + "wpe.weight"}};
  }
  if (layer == model.layers + 1) {
    std::vector<TensorName> head = {{ours + "ln_f.weight", t + "ln_f.weight"},
                                    {ours + "ln_f.bias", t + "ln_f.bias"}};
    if (head_is_tied(model)) {
      head.push_back({ours + "tied_weight", t + "wte.weight"});
    } else {
      head.push_back({ours + "head_weight", "lm_head.weight"});
    }
    return head;
  }
  const std::string h = fmt::format("{}h.{}.", t, layer - 1);
  return {{ours + "ln1.weight", h + "ln_1.weight"},
          {ours + "ln1.bias", h + "ln_1.bias"},
          {ours + "qkv.weight", h + "attn.c_attn.weight", true},
          {ours + "qkv.bias", h + "attn.c_attn.bias"},
          {ours + "attn_out.weight", h + "attn.c_proj.weight", true},
          {ours + "attn_out.bias", h + "attn.c_proj.bias"},
          {ours + "ln2.weight", h + "ln_2.weight"},
          {ours + "ln2.bias", h + "ln_2.bias"},
          {ours + "fc.weight", h + "mlp.c_fc.weight", true},
          {ours + "fc.bias", h + "mlp.c_fc.bias"},
          {ours + "fc_out.weight", h + "mlp.c_proj.weight", true},
          {ours + "fc_out.bias", h + "mlp.c_proj.bias"}};
}

std::vector<TensorName> llama_layer(const ModelConfig& model, int64_t layer) {
  const std::string ours = fmt::format("layer{}.", layer);
  if (layer == 0) return {{ours + "token_weight", "model.embed_tokens.weight"}};
  if (layer == model.layers + 1) {
    std::vector<TensorName> head = {{ours + "norm.weight", "model.norm.weight"}};
    if (head_is_tied(model)) {
      head.push_back({ours + "tied_weight", "model.embed_tokens.weight"});
    } else {
      head.push_back({ours + "head_weight", "lm_head.weight"});
    }
    return head;
  }
  const std::string h = fmt::format("model.layers.{}.", layer - 1);
  return {{ours + "attn_norm.weight", h + "input_layernorm.weight"},
          {ours + "q.weight", h + "self_attn.q_proj.weight"},
          {ours + "k.weight", h + "self_attn.k_proj.weight"},
          {ours + "v.weight", h + "self_attn.v_proj.weight"},
          {ours + "o.weight", h + "self_attn.o_proj.weight"},
          {ours + "mlp_norm.weight", h + "post_attention_layernorm.weight"},
          {ours + "gate.weight", h + "mlp.gate_proj.weight"},
          {ours + "up.weight", h + "mlp.up_proj.weight"},
          {ours + "down.weight", h + "mlp.down_proj.weight"}};
}

}  // namespace

std::vector<TensorName> layer_tensor_names(const ModelConfig& model, int64_t layer,
                                           const std::string& gpt2_prefix) {
  if (layer < 0 || layer > model.layers + 1) {
    throw std::logic_error(fmt::format("layer {} is outside the model's {} layers", layer, model.layers + 2));
  }
  if (model.kind == "gpt") return gpt2_layer(model, layer, gpt2_prefix);
  if (model.kind == "llama") return llama_layer(model, layer);
  fail("model.kind '{}' has no Hugging Face form; gpt and llama do", model.kind);
}

std::vector<TensorName> model_tensor_names(const ModelConfig& model) {
  std::vector<TensorName> names;
  for (int64_t layer = 0; layer <= model.layers + 1; ++layer) {
    for (auto& name : layer_tensor_names(model, layer)) {
      const std::string tied = ".tied_weight";
      const bool embedding_again =
          layer == model.layers + 1 && name.pipetrain.size() > tied.size() &&
          name.pipetrain.compare(name.pipetrain.size() - tied.size(), tied.size(), tied) == 0;
      if (!embedding_again) names.push_back(std::move(name));
    }
  }
  return names;
}

}  // namespace pipetrain::hf
