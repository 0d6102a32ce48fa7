#pragma once
// A decoder-only transformer (GPT-2 or Llama family) written as an ordered list of layers:
// [embedding, block 0 .. block L-1, head], so a pipeline can cut it into stages at any layer
// boundary. Layer i is initialised from its own
// generator seeded by (seed, i): any subset of layers built anywhere gets the same weights.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/rope_scaling.h"
#include "device/precision.h"
#include "model/model.h"
#include "model/slice_cache.h"

namespace pipetrain {

// The two decoder families the stack builds. GPT-2: learned positions, LayerNorm, GELU MLP,
// biases, head tied to the embedding. Llama: rotary positions, RMSNorm, SwiGLU MLP, grouped-query
// attention, no biases, head tied or not (model/llama_layers.h).
enum class DecoderFamily { Gpt2, Llama };

struct GptConfig {
  DecoderFamily family = DecoderFamily::Gpt2;
  int64_t vocab_size = 256;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t kv_heads = 0;    // Llama: key/value heads, dividing heads (grouped-query attention); 0 = heads
  int64_t layers = 4;      // transformer blocks
  int64_t seq_len = 128;
  int64_t positions = 0;   // GPT-2: rows of the learned position table, >= seq_len; 0 = seq_len
  int64_t ffn_hidden = 0;  // the MLP's inner width; 0 = 4 d_model
  double norm_eps = 1e-5;   // LayerNorm / RMSNorm epsilon
  bool gelu_tanh = false;   // GPT-2: GELU's tanh approximation (transformers' "gelu_new")
  bool tied_head = true;    // the head's weight is the token embedding's
  double rope_theta = 10000;  // Llama: rotary base
  RopeScaling rope_scaling;
  // Parameters are initialised in float32 and then converted (exactly), so a float64 model
  // starts from the same weights; activations and gradients follow the parameters' dtype.
  torch::ScalarType dtype = torch::kFloat32;
  // Mixed precision: layers compute in a ComputeScope and hand on at_boundary's rounding.
  device::Precision precision;
  // > 0: a stack ending with the head returns the head's normalised input and its loss is
  // chunked cross-entropy over this many tokens' logits at a time (model.loss_chunk_tokens).
  int64_t loss_chunk_tokens = 0;

  int64_t layer_count() const { return layers + 2; }  // embedding + blocks + head
  int64_t key_value_heads() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t position_rows() const { return positions > 0 ? positions : seq_len; }
  int64_t mlp_width() const { return ffn_hidden > 0 ? ffn_hidden : 4 * d_model; }
};

// What a stack that ends with the head returns: the logits [B, T, V], or the head's normalised
// input [B, T, D] (after the final layer norm) for a loss that applies the head's weight itself
// without materialising every logit (chunked cross-entropy).
enum class HeadOutput { Logits, Hidden };

class GptLayer : public torch::nn::Module {
 public:
  // Embedding: int64 tokens [B, T] -> [B, T, D]; block: [B, T, D] -> [B, T, D];
  // head: [B, T, D] -> logits [B, T, V].
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
  // A token slice starting at position `start` of its sequences (TeraPipe); attention layers
  // read and extend `kv`. Layers without position or attention run as forward().
  virtual torch::Tensor forward_slice(const torch::Tensor& x, int64_t /*start*/, LayerKv& /*kv*/) {
    return forward(x);
  }
};

class TokenEmbedding : public GptLayer {
 public:
  TokenEmbedding(const GptConfig& config, torch::Generator& generator);
  torch::Tensor forward(const torch::Tensor& tokens) override;
  torch::Tensor forward_slice(const torch::Tensor& tokens, int64_t start, LayerKv& kv) override;
  torch::Tensor token_weight;     // [V, D], tied to the head unless config.tied_head is false
  torch::Tensor position_weight;  // GPT-2: [positions, D]; Llama: none (rotary positions)

 private:
  torch::Tensor embed(const torch::Tensor& tokens, int64_t start);  // tokens at positions start..
};

class TransformerBlock : public GptLayer {
 public:
  TransformerBlock(const GptConfig& config, torch::Generator& generator);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor forward_slice(const torch::Tensor& x, int64_t start, LayerKv& kv) override;

 private:
  torch::Tensor attention(const torch::Tensor& x, LayerKv* kv);
  torch::Tensor mlp(const torch::Tensor& h);
  int64_t heads_;
  bool gelu_tanh_;
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, attn_out_{nullptr}, fc_{nullptr}, fc_out_{nullptr};
};

// The rows of the head's weight as its low-precision product computes them: a vocabulary of
// 4096 or more padded with zero rows to a multiple of 64. GPT-2's 50257 leaves the logits' rows
// unaligned and cuBLAS falls back to slow kernels: measured on an H200 (bench/gpu_profile.sh),
// the head's three products took 30.8 ms of an 85 ms bfloat16 step of GPT-2 small at 16 x 1024
// tokens. Smaller vocabularies keep their size (padding would cost more than it saves).
int64_t aligned_head_rows(int64_t vocab_size);

class LmHead : public GptLayer {
 public:
  // An untied head (config.tied_head false) owns "head_weight" [V, D], drawn from `generator`.
  LmHead(const GptConfig& config, torch::Generator& generator);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor normalize(const torch::Tensor& x);  // the final norm: [B, T, D]
  // A tied head's logits use the token embedding's weight directly. When the embedding lives in
  // the same module it is shared; a pipeline stage without the embedding owns a copy instead.
  void tie_to(const torch::Tensor& token_weight);
  void own_copy_of(const torch::Tensor& token_weight);
  const torch::Tensor& tied_weight() const { return tied_weight_; }  // the head's weight, tied or not

 private:
  std::function<torch::Tensor(const torch::Tensor&)> normalize_;  // LayerNorm (GPT-2) or RmsNorm (Llama)
  torch::Tensor tied_weight_;
  device::Precision precision_;
};

// The layers [first, last) of a GPT, registered as "layer<i>" so parameter names are the same
// whatever the partition.
class GptStack : public StageModule, public TokenSlicedStage, public TextGenerator {
 public:
  GptStack(const GptConfig& config, uint64_t seed, int64_t first, int64_t last);
  // A stack holding the head returns the logits [B, T, V], or with config.loss_chunk_tokens the
  // head's normalised input [B, T, D] for loss() to apply the head's weight chunk by chunk.
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor logits(const torch::Tensor& tokens);  // the whole model's logits, always
  // The token slice [start, start + x.size(1)) of the sequences whose earlier slices' K/V are in
  // `cache` (appended to): slices run in order give the unsliced forward's values.
  torch::Tensor forward_slice(const torch::Tensor& x, int64_t start, SequenceKvCache& cache) override;
  // Mean next-token cross-entropy of forward()'s output against the targets [B, T]: of the
  // logits, or chunked cross-entropy (loss/chunked_cross_entropy.h) of the head's input, never
  // holding more than loss_chunk_tokens x V logits. Same loss and gradients either way.
  torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& targets) override;
  TokenSlicedStage* token_sliced() override { return this; }
  TextGenerator* text_generator() override { return has_all_layers() ? this : nullptr; }
  // Samples `count` tokens after `prompt` (temperature sampling, seeded).
  std::vector<int64_t> generate(std::vector<int64_t> prompt, int64_t count, double temperature,
                                uint64_t seed) override;
  bool has_head() const { return last_ == config_.layer_count(); }
  bool has_all_layers() const { return first_ == 0 && has_head(); }
  // The head's weight [V, D]: the embedding's token weight itself when this stack holds both,
  // otherwise the head's own copy. Throws std::logic_error without the head.
  const torch::Tensor& head_weight() const;
  int64_t first() const { return first_; }
  int64_t last() const { return last_; }
  const GptConfig& config() const { return config_; }
  std::vector<std::shared_ptr<GptLayer>>& layers() { return layers_; }

 private:
  torch::Tensor run_layers(const torch::Tensor& x, HeadOutput head,
                           const std::function<torch::Tensor(GptLayer&, size_t, const torch::Tensor&)>& layer);
  HeadOutput head_output() const;
  GptConfig config_;
  int64_t first_, last_;
  std::vector<std::shared_ptr<GptLayer>> layers_;
};

std::shared_ptr<GptStack> make_gpt(const GptConfig& config, uint64_t seed);

// Mean next-token cross-entropy of logits [B, T, V] against targets [B, T], accumulated in float32
// at least (loss::softmax_cross_entropy: it keeps the logits, not a float32 log-softmax of them).
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// The whole model's GptStack::generate.
std::vector<int64_t> generate(GptStack& model, std::vector<int64_t> prompt, int64_t count,
                              double temperature, uint64_t seed);

}  // namespace pipetrain
