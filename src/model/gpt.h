#pragma once
// A GPT written as an ordered list of layers: [embedding, block 0 .. block L-1, head], so a
// pipeline can cut it into stages at any layer boundary. Layer i is initialised from its own
// generator seeded by (seed, i): any subset of layers built anywhere gets the same weights.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "device/precision.h"
#include "model/model.h"
#include "model/slice_cache.h"

namespace pipetrain {

struct GptConfig {
  int64_t vocab_size = 256;
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 4;  // transformer blocks
  int64_t seq_len = 128;
  // Parameters are initialised in float32 and then converted (exactly), so a float64 model
  // starts from the same weights; activations and gradients follow the parameters' dtype.
  torch::ScalarType dtype = torch::kFloat32;
  // Mixed precision: layers compute in a ComputeScope and hand on at_boundary's rounding.
  device::Precision precision;
  // > 0: a stack ending with the head returns the head's normalised input and its loss is
  // chunked cross-entropy over this many tokens' logits at a time (model.loss_chunk_tokens).
  int64_t loss_chunk_tokens = 0;

  int64_t layer_count() const { return layers + 2; }  // embedding + blocks + head
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
  torch::Tensor token_weight;     // [V, D], tied to the head
  torch::Tensor position_weight;  // [seq_len, D]
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
  torch::nn::LayerNorm ln1_{nullptr}, ln2_{nullptr};
  torch::nn::Linear qkv_{nullptr}, attn_out_{nullptr}, fc_{nullptr}, fc_out_{nullptr};
};

class LmHead : public GptLayer {
 public:
  LmHead(const GptConfig& config, torch::Generator& generator);
  torch::Tensor forward(const torch::Tensor& x) override;
  torch::Tensor normalize(const torch::Tensor& x);  // the final layer norm: [B, T, D]
  // Logits use the token embedding's weight directly (weight tying). When the embedding lives in
  // the same module it is shared; a pipeline stage without the embedding owns a copy instead.
  void tie_to(const torch::Tensor& token_weight);
  void own_copy_of(const torch::Tensor& token_weight);
  const torch::Tensor& tied_weight() const { return tied_weight_; }

 private:
  torch::nn::LayerNorm ln_f_{nullptr};
  torch::Tensor tied_weight_;
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

// Mean next-token cross-entropy of logits [B, T, V] against targets [B, T].
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// The whole model's GptStack::generate.
std::vector<int64_t> generate(GptStack& model, std::vector<int64_t> prompt, int64_t count,
                              double temperature, uint64_t seed);

}  // namespace pipetrain
