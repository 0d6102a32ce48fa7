#include "model/gpt.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "core/stop_signal.h"
#include "loss/chunked_cross_entropy.h"
#include "loss/softmax_cross_entropy.h"
#include "model/attention.h"
#include "model/linear.h"
#include "model/llama_layers.h"
#include "model/norm.h"

namespace pipetrain {
namespace {

constexpr double kInitStd = 0.02;

torch::Generator layer_generator(uint64_t seed, int64_t layer) {
  // splitmix-style mixing so neighbouring seeds/layers give unrelated streams
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(layer + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0x94D049BB133111EBull;
  return at::detail::createCPUGenerator(z ^ (z >> 31));
}

void init_linear(torch::nn::Linear& linear, double std, torch::Generator& generator) {
  torch::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std, generator);
  linear->bias.zero_();
}

}  // namespace

TokenEmbedding::TokenEmbedding(const GptConfig& config, torch::Generator& generator) {
  torch::NoGradGuard no_grad;
  token_weight = register_parameter(
      "token_weight", torch::empty({config.vocab_size, config.d_model}).normal_(0.0, kInitStd, generator));
  if (config.family == DecoderFamily::Llama) return;  // rotary positions, in each block
  position_weight = register_parameter(
      "position_weight", torch::empty({config.position_rows(), config.d_model}).normal_(0.0, kInitStd, generator));
}

torch::Tensor TokenEmbedding::forward(const torch::Tensor& tokens) { return embed(tokens, 0); }

// The embedding keeps no cache: a slice needs only its position offset.
torch::Tensor TokenEmbedding::forward_slice(const torch::Tensor& tokens, int64_t start, LayerKv&) {
  return embed(tokens, start);
}

torch::Tensor TokenEmbedding::embed(const torch::Tensor& tokens, int64_t start) {
  if (!position_weight.defined()) return torch::embedding(token_weight, tokens);
  // The position slice's node first: the backward then runs the token embedding's (its dense
  // [V, D] gradient) before the positions', the order the memory model measured (GptLayerMemory).
  const auto positions = position_weight.slice(0, start, start + tokens.size(1));
  return torch::embedding(token_weight, tokens) + positions;
}

TransformerBlock::TransformerBlock(const GptConfig& config, torch::Generator& generator)
    : heads_(config.heads), gelu_tanh_(config.gelu_tanh) {
  const int64_t d = config.d_model, inner = config.mlp_width();
  const auto norm = torch::nn::LayerNormOptions({d}).eps(config.norm_eps);
  ln1_ = register_module("ln1", torch::nn::LayerNorm(norm));
  qkv_ = register_module("qkv", torch::nn::Linear(d, 3 * d));
  attn_out_ = register_module("attn_out", torch::nn::Linear(d, d));
  ln2_ = register_module("ln2", torch::nn::LayerNorm(norm));
  fc_ = register_module("fc", torch::nn::Linear(d, inner));
  fc_out_ = register_module("fc_out", torch::nn::Linear(inner, d));
  // GPT-2: residual projections scaled down by sqrt(2 * layers) to keep the stream's variance.
  const double residual_std = kInitStd / std::sqrt(2.0 * static_cast<double>(config.layers));
  init_linear(qkv_, kInitStd, generator);
  init_linear(attn_out_, residual_std, generator);
  init_linear(fc_, kInitStd, generator);
  init_linear(fc_out_, residual_std, generator);
}

// With `kv`, x is a token slice after kv->context() earlier tokens (model/attention.h).
torch::Tensor TransformerBlock::attention(const torch::Tensor& x, LayerKv* kv) {
  const int64_t batch = x.size(0), length = x.size(1), d = x.size(2);
  const auto [q, k, v] = split_qkv(linear(qkv_, x), heads_);
  const auto mixed = causal_attention(q, k, v, kv);  // [B, H, T, hd]
  return linear(attn_out_, mixed.transpose(1, 2).reshape({batch, length, d}));
}

torch::Tensor TransformerBlock::mlp(const torch::Tensor& h) {
  const auto inner = torch::gelu(linear(fc_, layer_norm(ln2_, h)), gelu_tanh_ ? "tanh" : "none");
  return h + linear(fc_out_, inner);
}

torch::Tensor TransformerBlock::forward(const torch::Tensor& x) {
  return mlp(x + attention(layer_norm(ln1_, x), nullptr));
}

torch::Tensor TransformerBlock::forward_slice(const torch::Tensor& x, int64_t start, LayerKv& kv) {
  if (kv.context() != start) {
    throw std::logic_error("token slice starts at " + std::to_string(start) + " but " +
                           std::to_string(kv.context()) + " earlier tokens are cached");
  }
  return mlp(x + attention(layer_norm(ln1_, x), &kv));
}

int64_t aligned_head_rows(int64_t vocab_size) {
  return vocab_size < 4096 ? vocab_size : (vocab_size + 63) / 64 * 64;
}

namespace {

// The head weight [V, D] as a low-precision copy with aligned_head_rows' zero rows below it.
// Its backward is the gradient's first V rows in the weight's dtype: an in-place copy into a
// padded buffer would make autograd clone the whole padded gradient and its first V rows once
// more before the cast (measured: R D + V D bfloat16 values more at the head's peak).
class PaddedRowsCopy : public torch::autograd::Function<PaddedRowsCopy> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& weight,
                               int64_t rows, c10::ScalarType dtype) {
    const int64_t vocab = weight.size(0);
    ctx->saved_data["vocab"] = vocab;
    ctx->saved_data["dtype"] = weight.scalar_type();
    auto padded = torch::empty({rows, weight.size(1)}, weight.options().dtype(dtype));
    padded.narrow(0, vocab, rows - vocab).zero_();  // only the padding: the rest is copied over
    padded.narrow(0, 0, vocab).copy_(weight);
    return padded;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const int64_t vocab = ctx->saved_data["vocab"].toInt();
    const auto dtype = ctx->saved_data["dtype"].toScalarType();
    return {grads[0].narrow(0, 0, vocab).to(dtype), torch::Tensor(), torch::Tensor()};
  }
};

// Mixed precision: the product runs on a low-precision copy of the weight (autocast would make
// one anyway), padded to aligned_head_rows with zero rows, and the logits of those rows cut off
// again, so the result is the unpadded product's (no extra memory: the copy replaces
// autocast's). Zero rows get zero gradient.
torch::Tensor aligned_head_product(const torch::Tensor& h, const torch::Tensor& weight,
                                   c10::ScalarType compute) {
  const int64_t vocab = weight.size(0), rows = aligned_head_rows(vocab);
  if (rows == vocab) return torch::matmul(h, weight.t());
  const auto padded = PaddedRowsCopy::apply(weight, rows, compute);
  return torch::matmul(h.to(compute), padded.t()).narrow(-1, 0, vocab);
}

}  // namespace

LmHead::LmHead(const GptConfig& config, torch::Generator& generator) : precision_(config.precision) {
  const int64_t d = config.d_model;
  if (config.family == DecoderFamily::Llama) {
    auto norm = register_module("norm", RmsNorm(d, config.norm_eps));
    normalize_ = [norm](const torch::Tensor& x) { return norm->forward(x); };
  } else {
    auto norm = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d}).eps(config.norm_eps)));
    normalize_ = [norm](const torch::Tensor& x) { return layer_norm(norm, x); };
  }
  if (!config.tied_head) {
    torch::NoGradGuard no_grad;
    tied_weight_ = register_parameter(
        "head_weight", torch::empty({config.vocab_size, d}).normal_(0.0, kInitStd, generator));
  }
}

torch::Tensor LmHead::forward(const torch::Tensor& x) {
  if (!tied_weight_.defined()) throw std::logic_error("LmHead used before tie_to/own_copy_of");
  if (!precision_.mixed()) return torch::matmul(normalize(x), tied_weight_.t());
  return aligned_head_product(normalize(x), tied_weight_, precision_.activation_dtype());
}

torch::Tensor LmHead::normalize(const torch::Tensor& x) { return normalize_(x); }

void LmHead::tie_to(const torch::Tensor& token_weight) { tied_weight_ = token_weight; }

void LmHead::own_copy_of(const torch::Tensor& token_weight) {
  tied_weight_ = register_parameter("tied_weight", token_weight.detach().clone());
}

GptStack::GptStack(const GptConfig& config, uint64_t seed, int64_t first, int64_t last)
    : config_(config), first_(first), last_(last) {
  if (first < 0 || last > config.layer_count() || first >= last) {
    fail("layer range [{}, {}) is outside the model's {} layers", first, last, config.layer_count());
  }
  const int64_t head_index = config.layer_count() - 1;
  for (int64_t i = first; i < last; ++i) {
    auto generator = layer_generator(seed, i);
    std::shared_ptr<GptLayer> layer;
    if (i == 0) {
      layer = std::make_shared<TokenEmbedding>(config, generator);
    } else if (i == head_index) {
      layer = std::make_shared<LmHead>(config, generator);
    } else if (config.family == DecoderFamily::Llama) {
      layer = std::make_shared<LlamaBlock>(config, generator);
    } else {
      layer = std::make_shared<TransformerBlock>(config, generator);
    }
    layers_.push_back(register_module("layer" + std::to_string(i), layer));
  }
  if (last == config.layer_count() && config.tied_head) {
    auto head = std::static_pointer_cast<LmHead>(layers_.back());
    if (first == 0) {
      head->tie_to(std::static_pointer_cast<TokenEmbedding>(layers_.front())->token_weight);
    } else {  // rebuild the embedding's initial weight so both copies start equal
      auto generator = layer_generator(seed, 0);
      head->own_copy_of(TokenEmbedding(config, generator).token_weight);
    }
  }
  // Module::to swaps each parameter's data in place, so the head's tie to the embedding holds.
  to(config.dtype);
}

HeadOutput GptStack::head_output() const {
  return config_.loss_chunk_tokens > 0 ? HeadOutput::Hidden : HeadOutput::Logits;
}

// Runs `layer` over this stack's layers; with HeadOutput::Hidden the head stops at its norm.
torch::Tensor GptStack::run_layers(
    const torch::Tensor& x, HeadOutput head,
    const std::function<torch::Tensor(GptLayer&, size_t, const torch::Tensor&)>& layer) {
  const bool hidden = head == HeadOutput::Hidden && has_head();
  const device::Precision& precision = config_.precision;
  device::ComputeScope scope(precision, x.device().type());
  torch::Tensor h = x;
  for (size_t i = 0; i + (hidden ? 1 : 0) < layers_.size(); ++i) {
    h = device::at_boundary(layer(*layers_[i], i, h), precision);
  }
  if (!hidden) return h;
  return device::at_boundary(std::static_pointer_cast<LmHead>(layers_.back())->normalize(h), precision);
}

torch::Tensor GptStack::forward(const torch::Tensor& x) {
  return run_layers(x, head_output(),
                    [](GptLayer& layer, size_t, const torch::Tensor& h) { return layer.forward(h); });
}

torch::Tensor GptStack::logits(const torch::Tensor& tokens) {
  if (!has_all_layers()) throw std::logic_error("logits: this stack is not the whole model");
  return run_layers(tokens, HeadOutput::Logits,
                    [](GptLayer& layer, size_t, const torch::Tensor& h) { return layer.forward(h); });
}

torch::Tensor GptStack::forward_slice(const torch::Tensor& x, int64_t start,
                                      SequenceKvCache& cache) {
  return run_layers(x, head_output(), [&](GptLayer& layer, size_t i, const torch::Tensor& h) {
    return layer.forward_slice(h, start, cache.layer(i));
  });
}

torch::Tensor GptStack::loss(const torch::Tensor& output, const torch::Tensor& targets) {
  // The loss in float32 at least (float32 under mixed precision): a log-softmax rounded to
  // bfloat16 would lose the small probabilities. lm_loss accumulates in float32 from the
  // bfloat16 logits themselves; the chunked loss applies the head in float32.
  if (head_output() == HeadOutput::Logits) return lm_loss(output, targets);
  const torch::Tensor wide = device::at_least_float32(output);
  loss::ChunkedCrossEntropyOptions options;
  options.chunk_tokens = config_.loss_chunk_tokens;
  return loss::chunked_cross_entropy(wide.reshape({-1, wide.size(-1)}), head_weight(),
                                     targets.reshape({-1}), options);
}

const torch::Tensor& GptStack::head_weight() const {
  if (!has_head()) throw std::logic_error("head_weight: this stack does not hold the head");
  return std::static_pointer_cast<LmHead>(layers_.back())->tied_weight();
}

std::shared_ptr<GptStack> make_gpt(const GptConfig& config, uint64_t seed) {
  return std::make_shared<GptStack>(config, seed, 0, config.layer_count());
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  return loss::softmax_cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

std::vector<int64_t> generate(GptStack& model, std::vector<int64_t> prompt, int64_t count,
                              double temperature, uint64_t seed) {
  return model.generate(std::move(prompt), count, temperature, seed);
}

std::vector<int64_t> GptStack::generate(std::vector<int64_t> prompt, int64_t count,
                                        double temperature, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(seed);
  if (prompt.empty()) prompt.push_back('\n');
  const int64_t context = config_.seq_len;
  std::vector<int64_t> out;
  for (int64_t i = 0; i < count; ++i) {
    if (stop_signal() != 0) break;  // SIGINT/SIGTERM: the tokens so far (sample.tokens may be huge)
    const int64_t begin = std::max<int64_t>(0, static_cast<int64_t>(prompt.size()) - context);
    auto window = torch::tensor(std::vector<int64_t>(prompt.begin() + begin, prompt.end()),
                                torch::kInt64).unsqueeze(0).to(head_weight().device());
    auto logits = this->logits(window).select(1, window.size(1) - 1).squeeze(0);
    auto probabilities = torch::softmax(logits.to(torch::kCPU, torch::kFloat64) / temperature, -1);
    const int64_t next = torch::multinomial(probabilities, 1, false, generator).item<int64_t>();
    prompt.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace pipetrain
