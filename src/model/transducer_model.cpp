#include "model/transducer_model.h"

#include <stdexcept>

#include <fmt/format.h>

#include "core/error.h"
#include "model/registry.h"
#include "speech/corpus_text.h"

namespace pipetrain {
namespace {

bool transducer_part_of(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TransducerConfig transducer_config_from(const ModelConfig& model) {
  TransducerConfig config;
  config.encoder_layers = model.layers;
  config.d_model = model.d_model;
  config.heads = model.heads;
  config.max_frames = model.seq_len;
  config.max_labels = model.max_labels;
  config.vocabulary = int64_t(speech::character_vocabulary().size());
  config.sample_wise = model.transducer_loss == "sample-wise";
  config.dtype = compute_dtype(model);
  if (config.d_model % config.heads != 0) {
    fail("model.heads ({}) must divide model.d_model ({})", config.heads, config.d_model);
  }
  return config;
}

std::string TransducerModel::describe() const {
  return fmt::format(
      "RNN-T: 4x convolutional subsampling, {} transformer blocks of {} ({} heads), "
      "LSTM predictor, {} loss; up to {} frames and {} labels",
      config_.encoder_layers, config_.d_model, config_.heads,
      config_.sample_wise ? "sample-wise" : "batched", config_.max_frames, config_.max_labels);
}

std::string TransducerModel::layer_name(int64_t layer) const {
  if (layer == 0) return "subsample";
  if (layer == config_.layer_count() - 1) return "joint";
  return fmt::format("encoder{}", layer - 1);
}

std::shared_ptr<StageModule> TransducerModel::make_stage(int64_t first, int64_t last) const {
  return std::make_shared<TransducerStack>(config_, seed_, first, last);
}

TensorSpec TransducerModel::input_spec(int64_t rows) const {
  return {{rows, config_.max_frames, config_.mel_bins + 1}, config_.dtype};
}

// Every boundary: d_model values and the frame count per encoder frame.
TensorSpec TransducerModel::boundary_spec(int64_t, int64_t rows) const {
  return {{rows, config_.encoder_frames(), config_.d_model + 1}, config_.dtype};
}

// Weight matrices, convolution kernels and the LSTM's are hidden; the joint's output matrix the
// head; the predictor's embedding an embedding; layer norm weights gains.
ParameterRole TransducerModel::role_of(const std::string& parameter, const std::vector<int64_t>&) const {
  if (parameter.rfind("layer", 0) != 0 || parameter.find('.') == std::string::npos) {
    throw std::invalid_argument("not a transducer parameter name: '" + parameter + "'");
  }
  if (transducer_part_of(parameter, "bias")) return ParameterRole::Bias;
  if (transducer_part_of(parameter, ".norm")) return ParameterRole::Gain;
  if (transducer_part_of(parameter, ".embedding.")) return ParameterRole::Embedding;
  if (transducer_part_of(parameter, ".joint.output.")) return ParameterRole::Head;
  return ParameterRole::Hidden;
}

// Matrix products and convolutions (2 FLOPs per multiply-add); the joint layer's joint network
// over every (frame, label) pair of max_labels / 2 labels on average.
LayerWork TransducerModel::layer_work(int64_t layer, int64_t rows) const {
  const double b = double(rows), t = double(config_.encoder_frames()), d = double(config_.d_model);
  const double c = double(config_.conv_channels()), bins = double(config_.mel_bins);
  LayerWork work;
  work.output_values = b * t * (d + 1);
  if (layer == 0) {
    const double conv1 = 2 * b * (2 * t) * (bins / 2) * c * 9,
                 conv2 = 2 * b * t * (bins / 4) * c * c * 9;
    work.forward_flops = conv1 + conv2 + 2 * b * t * c * (bins / 4) * d;
    work.parameters = 10 * c + c * c * 9 + c + c * (bins / 4) * d + d;
  } else if (layer == config_.layer_count() - 1) {
    const double u = double(config_.max_labels) / 2 + 1, v = double(config_.vocabulary);
    work.forward_flops = 2 * b * (t * d * d + u * 9 * d * d + t * u * (d * v + d));
    work.parameters = 2 * (d * d + d) + v * d + 8 * d * d + 8 * d + d * v + v;
  } else {
    work.forward_flops = 2 * b * t * 12 * d * d + 4 * b * t * t * d;
    work.parameters = 12 * d * d + 13 * d;
  }
  return work;
}

// Full-length random features and random label counts (the profiler's).
Microbatch TransducerModel::example(int64_t rows, torch::Generator& generator) const {
  auto inputs = torch::randn({rows, config_.max_frames, config_.mel_bins + 1}, generator,
                             torch::dtype(config_.dtype));
  inputs.select(2, config_.mel_bins).fill_(double(config_.max_frames));
  auto labels = torch::randint(1, config_.vocabulary, {rows, 1 + config_.max_labels}, generator,
                               torch::kInt64);
  labels.select(1, 0).copy_(
      torch::randint(1, config_.max_labels + 1, {rows}, generator, torch::kInt64));
  return {inputs, labels};
}

}  // namespace pipetrain
