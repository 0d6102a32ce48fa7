#pragma once
// The RNN-T recognizer (model/transducer.h) behind the model interface: [subsample, encoder
// blocks, joint], feature frames in (data.format "speech", model/speech_batch.h), the transducer
// loss out.
#include "core/config.h"
#include "model/model.h"
#include "model/transducer.h"

namespace pipetrain {

// model.layers encoder blocks of model.d_model with model.heads; model.seq_len frames and
// model.max_labels labels per utterance at most; model.transducer_loss.
TransducerConfig transducer_config_from(const ModelConfig& model);

class TransducerModel : public Model {
 public:
  TransducerModel(const TransducerConfig& config, uint64_t seed) : config_(config), seed_(seed) {}
  std::string kind() const override { return "transducer"; }
  std::vector<std::string> data_formats() const override { return {"speech", "safetensors"}; }
  std::string describe() const override;
  int64_t layer_count() const override { return config_.layer_count(); }
  std::string layer_name(int64_t layer) const override;
  std::shared_ptr<StageModule> make_stage(int64_t first, int64_t last) const override;
  TensorSpec input_spec(int64_t rows) const override;
  TensorSpec label_spec(int64_t rows) const override {
    return {{rows, 1 + config_.max_labels}, torch::kInt64};
  }
  TensorSpec boundary_spec(int64_t boundary, int64_t rows) const override;
  ParameterRole role_of(const std::string& parameter, const std::vector<int64_t>& shape) const override;
  LayerWork layer_work(int64_t layer, int64_t rows) const override;
  Microbatch example(int64_t rows, torch::Generator& generator) const override;

 private:
  TransducerConfig config_;
  uint64_t seed_;
};

}  // namespace pipetrain
