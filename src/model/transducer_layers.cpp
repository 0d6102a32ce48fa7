#include "model/transducer_layers.h"

#include <cmath>
#include <string>

#include "device/precision.h"
#include "model/attention.h"
#include "model/linear.h"
#include "model/norm.h"
#include "model/speech_batch.h"

namespace pipetrain {
namespace {

namespace F = torch::nn::functional;

bool transducer_name_has(const std::string& name, const char* part) {
  return name.find(part) != std::string::npos;
}

// Every parameter from the layer's own generator (libtorch's constructors draw from the global
// one): biases 0, norm gains 1, embeddings N(0, 1), other weights N(0, 1 / fan_in).
void initialise_transducer_layer(torch::nn::Module& layer, torch::Generator& generator) {
  torch::NoGradGuard no_grad;
  for (auto& item : layer.named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (transducer_name_has(name, "bias")) {
      p.zero_();
    } else if (transducer_name_has(name, "norm")) {
      p.fill_(1.0);
    } else if (transducer_name_has(name, "embedding")) {
      p.normal_(0.0, 1.0, generator);
    } else {
      p.normal_(0.0, 1.0 / std::sqrt(double(p.numel() / p.size(0))), generator);
    }
  }
}

// [rows, frames] true where the frame lies within its utterance.
torch::Tensor frames_within(const torch::Tensor& counts, int64_t frames) {
  return torch::arange(frames, counts.options()).unsqueeze(0) < counts.unsqueeze(1);
}

torch::Tensor sinusoidal_positions(int64_t frames, int64_t width,
                                   const torch::TensorOptions& options) {
  const auto position = torch::arange(frames, options.dtype(torch::kFloat64)).unsqueeze(1);
  const auto rate = torch::exp(torch::arange(0, width, 2, options.dtype(torch::kFloat64)) *
                               (-std::log(10000.0) / double(width)));
  auto table = torch::zeros({frames, width}, options.dtype(torch::kFloat64));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)},
                   torch::sin(position * rate));
  table.index_put_({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)},
                   torch::cos(position * rate).narrow(1, 0, width / 2));
  return table.to(options.dtype());
}

// Two stride-2 convolutions (each frame's features zeroed past the utterance's end, so a row's
// result does not depend on its padding), a projection to d_model and positions.
class ConvSubsampling : public TransducerLayer {
 public:
  explicit ConvSubsampling(const TransducerConfig& config)
      : config_(config),
        conv1_(register_module(
            "conv1",
            torch::nn::Conv2d(
                torch::nn::Conv2dOptions(1, config.conv_channels(), 3).stride(2).padding(1)))),
        conv2_(register_module(
            "conv2", torch::nn::Conv2d(
                         torch::nn::Conv2dOptions(config.conv_channels(), config.conv_channels(), 3)
                             .stride(2)
                             .padding(1)))),
        projection_(register_module(
            "projection", torch::nn::Linear(config.conv_channels() *
                                                TransducerConfig::subsampled(config.mel_bins),
                                            config.d_model))) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    const auto [features, frames] = split_frame_counts(x);
    const auto halved = torch::div(frames + 1, 2, "floor"),
               quartered = torch::div(halved + 1, 2, "floor");
    auto h = torch::relu(conv1_(features.unsqueeze(1)));
    h = h * frames_within(halved, h.size(2)).unsqueeze(1).unsqueeze(3).to(h.scalar_type());
    h = torch::relu(conv2_(h));  // [rows, channels, frames / 4, bins / 4]
    h = h.permute({0, 2, 1, 3}).flatten(2);
    h = linear(projection_, h) + sinusoidal_positions(h.size(1), config_.d_model, h.options());
    return with_frame_counts(h, quartered);
  }

 private:
  TransducerConfig config_;
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear projection_;
};

// x + attention(norm1(x)), then + feed-forward(norm2(x)); keys past an utterance's end masked.
class EncoderBlock : public TransducerLayer {
 public:
  explicit EncoderBlock(const TransducerConfig& config)
      : heads_(config.heads),
        norm1_(register_module(
            "norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))),
        qkv_(register_module("qkv", torch::nn::Linear(config.d_model, 3 * config.d_model))),
        attn_out_(register_module("attn_out", torch::nn::Linear(config.d_model, config.d_model))),
        norm2_(register_module(
            "norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.d_model})))),
        fc_(register_module("fc", torch::nn::Linear(config.d_model, 4 * config.d_model))),
        fc_out_(register_module("fc_out", torch::nn::Linear(4 * config.d_model, config.d_model))) {}

  torch::Tensor forward(const torch::Tensor& x) override {
    auto [h, frames] = split_frame_counts(x);
    h = h + attention(layer_norm(norm1_, h), frames);
    h = h + linear(fc_out_, torch::relu(linear(fc_, layer_norm(norm2_, h))));
    return with_frame_counts(h, frames);
  }

 private:
  torch::Tensor attention(const torch::Tensor& h, const torch::Tensor& frames) {
    const int64_t rows = h.size(0), length = h.size(1), width = h.size(2), head = width / heads_;
    const auto [q, k, v] = split_qkv(linear(qkv_, h), heads_);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(head));
    const auto keys = frames_within(frames, length).view({rows, 1, 1, length});
    scores = scores.masked_fill(keys.logical_not(), -std::numeric_limits<double>::infinity());
    // The softmax in the scores' dtype: CUDA's autocast would otherwise widen it to float32 (a
    // float32 [T, T] map kept for the backward) where the CPU's does not; both accumulate in
    // float32 inside.
    const auto mixed = torch::matmul(torch::softmax(scores, -1, scores.scalar_type()), v);
    return linear(attn_out_, mixed.transpose(1, 2).reshape({rows, length, width}));
  }

  int64_t heads_;
  torch::nn::LayerNorm norm1_;
  torch::nn::Linear qkv_, attn_out_;
  torch::nn::LayerNorm norm2_;
  torch::nn::Linear fc_, fc_out_;
};

}  // namespace

std::pair<torch::Tensor, torch::Tensor> split_frame_counts(const torch::Tensor& x) {
  const int64_t width = x.size(2) - 1;
  return {x.narrow(2, 0, width), speech_frame_counts(x)};  // the inputs' own encoding
}

torch::Tensor with_frame_counts(const torch::Tensor& values, const torch::Tensor& counts) {
  const auto mask = frames_within(counts, values.size(1)).to(values.scalar_type()).unsqueeze(2);
  return torch::cat({values, mask}, 2);
}

TransducerJoint::TransducerJoint(const TransducerConfig& config) : config_(config) {
  encoder_projection_ =
      register_module("encoder_projection", torch::nn::Linear(config.d_model, config.d_model));
  embedding_ =
      register_module("embedding", torch::nn::Embedding(config.vocabulary, config.d_model));
  lstm_ = register_module(
      "predictor",
      torch::nn::LSTM(torch::nn::LSTMOptions(config.d_model, config.d_model).batch_first(true)));
  predictor_projection_ =
      register_module("predictor_projection", torch::nn::Linear(config.d_model, config.d_model));
  network = register_module("joint", loss::JointNetwork(config.d_model, config.vocabulary));
}

torch::Tensor TransducerJoint::forward(const torch::Tensor& x) {
  const auto [h, frames] = split_frame_counts(x);
  return with_frame_counts(linear(encoder_projection_, h), frames);
}

torch::Tensor TransducerJoint::predict(const torch::Tensor& labels) {
  const auto start = torch::zeros({labels.size(0), 1}, labels.options());  // the blank
  const auto embedded = embedding_(torch::cat({start, labels}, 1));
  torch::Tensor states;
  {
    // In the weights' dtype under mixed precision: its recurrent state would otherwise round at
    // every label (and oneDNN has no float16 LSTM on a CPU); a small share of the model's work.
    device::FullPrecisionScope full(embedded.device().type());
    states = std::get<0>(lstm_(embedded));
  }
  return linear(predictor_projection_, states);
}

TransducerJoint::PredictorState TransducerJoint::initial_state() const {
  const auto zeros = torch::zeros({1, 1, config_.d_model}, embedding_->weight.options());
  return {zeros, zeros.clone()};
}

torch::Tensor TransducerJoint::predict_step(int64_t token, PredictorState& state) {
  const auto embedded = embedding_(
      torch::full({1, 1}, token, torch::dtype(torch::kInt64).device(embedding_->weight.device())));
  auto [output, next] = lstm_(embedded, state);
  state = next;
  return linear(predictor_projection_, output).view({config_.d_model});
}

std::shared_ptr<TransducerLayer> make_transducer_layer(const TransducerConfig& config,
                                                       int64_t layer, torch::Generator& generator) {
  std::shared_ptr<TransducerLayer> made;
  if (layer == 0) {
    made = std::make_shared<ConvSubsampling>(config);
  } else if (layer == config.layer_count() - 1) {
    made = std::make_shared<TransducerJoint>(config);
  } else {
    made = std::make_shared<EncoderBlock>(config);
  }
  initialise_transducer_layer(*made, generator);
  return made;
}

}  // namespace pipetrain
