#pragma once
// GPT behind the model interface (model/model.h): [embedding, block 0 .. L-1, head], the head
// tied to the embedding, byte or token ids in, next-token cross-entropy out.
#include "core/config.h"
#include "model/gpt.h"
#include "model/model.h"

namespace pipetrain {

// The GPT shape model.* describes.
GptConfig gpt_config_from(const ModelConfig& model);

class GptModel : public Model {
 public:
  GptModel(const GptConfig& config, uint64_t seed) : config_(config), seed_(seed) {}
  std::string kind() const override { return "gpt"; }
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
  GptConfig config_;
  uint64_t seed_;
};

}  // namespace pipetrain
