#pragma once
// The Llama family's pieces (Touvron et al. 2023, as transformers' LlamaForCausalLM computes
// them): RMSNorm, rotary position embeddings, and the decoder block with grouped-query
// attention and a SwiGLU MLP, no biases anywhere. GptStack (model/gpt.h) builds them when
// config.family is Llama.
#include <utility>

#include <torch/torch.h>

#include "model/gpt.h"

namespace pipetrain {

// y = x / sqrt(mean(x^2) + eps) * weight over the last dimension [D]. Normalised in at least
// float32 (bfloat16 inputs are widened), returned in the input's dtype times the weight.
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t width, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight;  // [D], ones at initialisation

 private:
  double eps_;
};
TORCH_MODULE(RmsNorm);

// cos and sin [T, hd] of positions start .. start + T - 1: computed in float64 whatever the
// model's dtype (frequencies from config.rope_theta and config.rope_scaling), then cast to `like`.
std::pair<torch::Tensor, torch::Tensor> rotary_tables(const GptConfig& config, int64_t start,
                                                      int64_t length, const torch::Tensor& like);
// Rotates x [B, heads, T, hd] by position ("rotate half": dimension i pairs with i + hd/2).
torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin);
// The rotary frequencies [hd / 2] in float64, scaling applied (exposed for tests).
torch::Tensor rotary_inverse_frequencies(const GptConfig& config);

class LlamaBlock : public GptLayer {
 public:
  LlamaBlock(const GptConfig& config, torch::Generator& generator);
  // [B, T, D] -> [B, T, D]: x + attention(norm(x)), then h + mlp(norm(h)).
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor forward_slice(const torch::Tensor& x, int64_t start, LayerKv& kv) override;

 private:
  torch::Tensor attention(const torch::Tensor& x, int64_t start, LayerKv* kv);
  torch::Tensor mlp(const torch::Tensor& h);  // h + down(silu(gate(n)) * up(n)), n = norm(h)
  GptConfig config_;
  RmsNorm attn_norm_{nullptr}, mlp_norm_{nullptr};
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr};
  torch::nn::Linear gate_{nullptr}, up_{nullptr}, down_{nullptr};
};

}  // namespace pipetrain
