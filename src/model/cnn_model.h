#pragma once
// The ResNet-style image classifier (model/cnn.h) behind the model interface:
// [stem, residual block 0 .. B-1, head], images in, cross-entropy over the classes out.
// Parameter roles: the default rule (model/parameter_role.h): the blocks' convolution kernels
// are Muon's hidden matrices, the stem's kernel the input embedding, the classifier the head.
#include "core/config.h"
#include "model/cnn.h"
#include "model/model.h"

namespace pipetrain {

// The CNN model.* describes: model.layers residual blocks, model.d_model the stem's channels.
CnnConfig cnn_config_from(const ModelConfig& model);

class CnnModel : public Model {
 public:
  CnnModel(const CnnConfig& config, uint64_t seed) : config_(config), seed_(seed) {}
  std::string kind() const override { return "cnn"; }
  std::vector<std::string> data_formats() const override { return {"fashion-mnist", "safetensors"}; }
  std::string describe() const override;
  int64_t layer_count() const override { return config_.layer_count(); }
  std::string layer_name(int64_t layer) const override;
  std::shared_ptr<StageModule> make_stage(int64_t first, int64_t last) const override;
  TensorSpec input_spec(int64_t rows) const override;
  TensorSpec label_spec(int64_t rows) const override { return {{rows}, torch::kInt64}; }
  TensorSpec boundary_spec(int64_t boundary, int64_t rows) const override;
  LayerWork layer_work(int64_t layer, int64_t rows) const override;
  Microbatch example(int64_t rows, torch::Generator& generator) const override;
  std::string microbatch_dependence() const override {
    return "BatchNorm normalises each microbatch with its own statistics";
  }

 private:
  CnnConfig config_;
  uint64_t seed_;
};

}  // namespace pipetrain
