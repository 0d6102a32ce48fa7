#include "model/llama_layers.h"

#include <cmath>

#include <string>

#include "model/attention.h"

namespace pipetrain {
namespace {

constexpr double kLlamaInitStd = 0.02;
constexpr double kPi = 3.14159265358979323846;

torch::nn::Linear unbiased(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}

void init_weight(torch::nn::Linear& linear, double std, torch::Generator& generator) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std, generator);
}

// Llama 3.1's bands (transformers' _compute_llama3_parameters): wavelengths longer than the
// original context / low_freq_factor are slowed by `factor`, shorter than original /
// high_freq_factor kept, and those between interpolated smoothly.
torch::Tensor llama3_scaled(const torch::Tensor& inverse, const RopeScaling& s) {
  const double original = double(s.original_context);
  const double low_wavelength = original / s.low_freq_factor;
  const double high_wavelength = original / s.high_freq_factor;
  const auto wavelength = 2 * kPi / inverse;
  auto scaled = torch::where(wavelength > low_wavelength, inverse / s.factor, inverse);
  const auto smooth = (original / wavelength - s.low_freq_factor) /
                      (s.high_freq_factor - s.low_freq_factor);
  const auto smoothed = (1 - smooth) * scaled / s.factor + smooth * scaled;
  const auto medium = (wavelength >= high_wavelength) & (wavelength <= low_wavelength);
  return torch::where(medium, smoothed, scaled);
}

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t width, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({width}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
  const auto wide = x.scalar_type() == torch::kFloat64 ? x : x.to(torch::kFloat32);
  const auto normalised = wide * torch::rsqrt(wide.pow(2).mean(-1, true) + eps_);
  return weight * normalised.to(x.scalar_type());
}

torch::Tensor rotary_inverse_frequencies(const GptConfig& config) {
  const int64_t head_dim = config.d_model / config.heads;
  const auto exponents = torch::arange(0, head_dim, 2, torch::kFloat64) / double(head_dim);
  auto inverse = 1.0 / torch::pow(config.rope_theta, exponents);
  switch (config.rope_scaling.kind) {
    case RopeScaling::Kind::None: return inverse;
    case RopeScaling::Kind::Linear: return inverse / config.rope_scaling.factor;
    case RopeScaling::Kind::Llama3: return llama3_scaled(inverse, config.rope_scaling);
  }
  return inverse;
}

std::pair<torch::Tensor, torch::Tensor> rotary_tables(const GptConfig& config, int64_t start,
                                                      int64_t length, const torch::Tensor& like) {
  const auto positions = torch::arange(start, start + length, torch::kFloat64);
  const auto angles = torch::outer(positions, rotary_inverse_frequencies(config));  // [T, hd/2]
  const auto both = torch::cat({angles, angles}, -1);                              // [T, hd]
  const auto options = torch::TensorOptions().dtype(like.scalar_type()).device(like.device());
  return {both.cos().to(options), both.sin().to(options)};
}

torch::Tensor apply_rotary(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const auto rotated = torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
  return x * cos + rotated * sin;
}

LlamaBlock::LlamaBlock(const GptConfig& config, torch::Generator& generator) : config_(config) {
  const int64_t d = config.d_model, head_dim = d / config.heads;
  attn_norm_ = register_module("attn_norm", RmsNorm(d, config.norm_eps));
  q_ = register_module("q", unbiased(d, d));
  k_ = register_module("k", unbiased(d, config.key_value_heads() * head_dim));
  v_ = register_module("v", unbiased(d, config.key_value_heads() * head_dim));
  o_ = register_module("o", unbiased(d, d));
  mlp_norm_ = register_module("mlp_norm", RmsNorm(d, config.norm_eps));
  gate_ = register_module("gate", unbiased(d, config.mlp_width()));
  up_ = register_module("up", unbiased(d, config.mlp_width()));
  down_ = register_module("down", unbiased(config.mlp_width(), d));
  // As GPT-2: the residual projections scaled down by sqrt(2 * layers).
  const double residual_std = kLlamaInitStd / std::sqrt(2.0 * static_cast<double>(config.layers));
  for (auto* linear : {&q_, &k_, &v_}) init_weight(*linear, kLlamaInitStd, generator);
  init_weight(o_, residual_std, generator);
  init_weight(gate_, kLlamaInitStd, generator);
  init_weight(up_, kLlamaInitStd, generator);
  init_weight(down_, residual_std, generator);
}

torch::Tensor LlamaBlock::attention(const torch::Tensor& x, int64_t start, LayerKv* kv) {
  const int64_t batch = x.size(0), length = x.size(1), d = x.size(2);
  const int64_t heads = config_.heads, kv_heads = config_.key_value_heads(), head_dim = d / heads;
  const auto q = q_->forward(x).view({batch, length, heads, head_dim}).transpose(1, 2);
  const auto k = k_->forward(x).view({batch, length, kv_heads, head_dim}).transpose(1, 2);
  const auto v = v_->forward(x).view({batch, length, kv_heads, head_dim}).transpose(1, 2);
  const auto [cos, sin] = rotary_tables(config_, start, length, q);
  const auto mixed = causal_attention(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, kv);
  return o_->forward(mixed.transpose(1, 2).reshape({batch, length, d}));
}

torch::Tensor LlamaBlock::mlp(const torch::Tensor& h) {
  const auto n = mlp_norm_->forward(h);
  return h + down_->forward(torch::silu(gate_->forward(n)) * up_->forward(n));
}

torch::Tensor LlamaBlock::forward(const torch::Tensor& x) {
  return mlp(x + attention(attn_norm_->forward(x), 0, nullptr));
}

torch::Tensor LlamaBlock::forward_slice(const torch::Tensor& x, int64_t start, LayerKv& kv) {
  if (kv.context() != start) {
    throw std::logic_error("token slice starts at " + std::to_string(start) + " but " +
                           std::to_string(kv.context()) + " earlier tokens are cached");
  }
  return mlp(x + attention(attn_norm_->forward(x), start, &kv));
}

}  // namespace pipetrain
