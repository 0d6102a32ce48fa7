#pragma once
// The decoders behind the model interface (model/model.h), model.kind "gpt" (GPT-2 family) or
// "llama": [embedding, block 0 .. L-1, head], the head tied to the embedding or its own, byte
// or token ids in, next-token cross-entropy out.
#include "core/config.h"
#include "model/gpt.h"
#include "model/model.h"

namespace pipetrain {

// The GPT shape model.* describes.
GptConfig gpt_config_from(const ModelConfig& model);

class GptModel : public Model {
 public:
  GptModel(const GptConfig& config, uint64_t seed) : config_(config), seed_(seed) {}
  // Layers start from the Hugging Face checkpoint model.init_from names (model/hf_weights.h)
  // instead of the seed's draws when it is not empty.
  GptModel(const GptConfig& config, uint64_t seed, ModelConfig initial_weights)
      : config_(config), seed_(seed), initial_weights_(std::move(initial_weights)) {}
  std::string kind() const override;  // "gpt" or "llama"
  std::vector<std::string> data_formats() const override { return {"bytes", "tokens", "safetensors"}; }
  std::string describe() const override;
  int64_t layer_count() const override { return config_.layer_count(); }
  std::string layer_name(int64_t layer) const override;
  std::shared_ptr<StageModule> make_stage(int64_t first, int64_t last) const override;
  TensorSpec input_spec(int64_t rows) const override;
  TensorSpec label_spec(int64_t rows) const override { return input_spec(rows); }
  TensorSpec boundary_spec(int64_t boundary, int64_t rows) const override;
  std::vector<SharedParameter> shared_parameters() const override;
  ParameterRole role_of(const std::string& parameter, const std::vector<int64_t>& shape) const override;
  LayerWork layer_work(int64_t layer, int64_t rows) const override;
  Microbatch example(int64_t rows, torch::Generator& generator) const override;
  int64_t sliceable_length() const override { return config_.seq_len; }

 private:
  LayerWork embedding_work(int64_t rows) const;
  LayerWork head_work(int64_t rows) const;
  LayerWork gpt2_block_work(int64_t rows) const;
  LayerWork llama_block_work(int64_t rows) const;
  GptConfig config_;
  uint64_t seed_;
  ModelConfig initial_weights_;  // its init_from: the checkpoint the layers start from, or ""
};

}  // namespace pipetrain
