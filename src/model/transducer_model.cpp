#include "model/transducer_model.h"

#include <algorithm>
#include <cmath>
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
  config.precision = model_precision(model);
  config.dtype = config.precision.parameter_dtype();
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

// Every boundary: d_model values and the frame mask per encoder frame.
TensorSpec TransducerModel::boundary_spec(int64_t, int64_t rows) const {
  return {{rows, config_.encoder_frames(), config_.d_model + 1}, config_.precision.activation_dtype()};
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

namespace {

// Memory per microbatch in values of the activation dtype (bfloat16's 2 bytes under mixed
// precision), counted from what libtorch's autograd keeps (checked against the counting
// allocator: TransducerLayerMemory.*, within 1%). Every
// utterance is taken at full length (max_frames, max_labels): the loss cuts a microbatch to its
// longest, so this bounds it. Symbols: b rows, t encoder frames, d d_model, u labels + 1, v the
// vocabulary; an int64 index is index() values.
struct TransducerShape {
  double b, t, d, u, v, heads;
  double value_bytes;  // of the activation dtype: what a value is
  bool mixed;          // float32 values (statistics, gradient sums) count wide() = 2
  bool onednn_lstm;    // the predictor runs oneDNN's LSTM (float32; float64 runs libtorch's own)
  double index() const { return 8 / value_bytes; }
  double wide() const { return mixed ? 2 : 1; }
};

// Kept: the first ReLU's output and its masked copy (the second convolution's input), the second
// ReLU's output and its flattened copy (the projection's input), the output, the frame mask.
// Mixed (measured, exact): autocast's copies of the features and of the three weights too.
// Backward peaks in the second convolution's (libtorch 2.11's oneDNN, measured): two tensors of
// its input's size (its input gradient and a buffer), three of its output's and the incoming
// gradient. Exact at d_model 32, 48, 64, 96, 128 and 256; at 80 the peak is 1.7% low (oneDNN
// pads 20 channels). Mixed on a CPU, oneDNN's bfloat16 convolution backward keeps float32
// scratch whose size depends on its algorithm and thread count: not modelled (docs/speech.md).
void subsample_memory(const TransducerConfig& config, const TransducerShape& s, LayerWork& work) {
  const double c = double(config.conv_channels()), halved = double((config.max_frames + 1) / 2);
  const double quartered_bins = double(TransducerConfig::subsampled(config.mel_bins));
  const double first = s.b * c * halved * double((config.mel_bins + 1) / 2),
               second = s.b * s.t * c * quartered_bins;
  const double output = s.b * s.t * (s.d + 1);
  work.stashed_values = 2 * first + 2 * second + output + s.b * halved;
  if (s.mixed) {
    const double weights = 9 * c + 9 * c * c + c * quartered_bins * s.d;
    work.stashed_values += s.b * double(config.max_frames * config.mel_bins) + weights;
  }
  work.workspace_values = 2 * first + 3 * second + output;
}

// Per frame: the norms' outputs and statistics, q, k and v copies, the mixed heads' copy, the
// residual, the ReLU output (4 d), the output (12 d + 5); the attention probabilities; the key
// mask (a byte a frame). Backward peaks in the MLP's (two 4 d gradients, or one with the first
// matrix's gradient) or, once the MLP's and the heads' copies are freed (8 d + 2), in the
// softmax's: the probabilities' and scores' gradients (2 attention maps) beside the incoming
// and residual gradients.
//
// Mixed (measured, TransducerLayerMemory.bfloat16_*): the norms' statistics are float32 (4 more
// values a frame) and autocast's bfloat16 copies of the four matrices (12 d^2) stay for the
// backward. Backward peaks in the MLP's (7 d a frame and the key mask's byte, beside fc's copy
// and fc_out's weight and bias gradients: 4 d^2 + 2 d), at its start beside the first float32
// weight gradient (8 d^2), or in the softmax's (the MLP's and the projection's copies freed).
// Measured with ATen's own CPU products: oneDNN's bfloat16 ones take a scratch buffer each,
// not modelled (a GPU's cuBLAS keeps one workspace).
void encoder_memory(const TransducerShape& s, LayerWork& work) {
  const double frames = s.b * s.t, attention = s.heads * s.t, d = s.d;
  if (s.mixed) {
    work.stashed_values = frames * (12 * d + 9 + attention) + frames * s.index() / 8 + 12 * d * d;
    work.workspace_values = std::max({frames * (7 * d + 0.5) + 4 * d * d + 2 * d,
                                      frames * (5 * d + 1) + 8 * d * d,
                                      frames * (2 * attention - 5 * d - 3) - 9 * d * d});
    return;
  }
  work.stashed_values = frames * (12 * d + 5 + attention) + frames * s.index() / 8;
  work.workspace_values = std::max({frames * (9 * d + 1), frames * (5 * d + 1) + 4 * d * d,
                                    frames * (2 * attention - 5 * d - 1)});
}

// oneDNN's LSTM workspace on a CPU (one layer, one direction, u steps, b rows, float32): its
// regions each start on a 4 KB page. The gates (4 d a step, the row padded as oneDNN pads a
// leading dimension: to 16 floats, and 16 more at a multiple of 256), three of the states of
// both layers' ends (u + 1 steps), two more unpadded, and one of the steps' states; measured
// exact at 17 of 19 shapes (rows 1-8, 1-81 steps, d 8-256; a page high at the others).
double onednn_lstm_workspace_bytes(double b, double u, double d) {
  const auto row = [](double width, bool padded) {
    double ld = std::ceil(width / 16) * 16;
    if (padded && std::fmod(ld, 256) == 0) ld += 16;
    return ld;
  };
  const auto pages = [](double bytes) { return std::ceil(bytes / 4096) * 4096; };
  const double ends = 2 * (u + 1) * b * 4;
  return pages(u * b * row(4 * d, true) * 4) + 3 * pages(ends * row(d, true)) +
         2 * pages(ends * row(d, false)) + pages(u * b * row(d, true) * 4);
}

// The predictor (measured, TransducerLayerMemory.*): oneDNN's LSTM keeps its input and output
// (time-major copies, one fewer for a single row, whose transposes are free), the projection's
// input copy, the initial and final states (4 b d) and its workspace; libtorch's own LSTM
// (float64) its input copy, the gates (4 d), cell, its tanh and the hidden state, the
// projection's input copy (9 d a position). Both: the label indices. The encoder projection
// keeps nothing of its own (its input is the previous layer's output). Mixed: the LSTM is
// float32 (`wide`), with its two copies at any row count; the projection's input copy is
// autocast's cast (one value a position), and both projections keep their weight's cast (d^2
// each).
double predictor_values(const TransducerShape& s) {
  const double labels = s.b * s.u * s.index(), positions = s.b * s.u * s.d;
  if (!s.onednn_lstm) return positions * 9 + labels;
  const double lstm = onednn_lstm_workspace_bytes(s.b, s.u, s.d) / s.value_bytes +
                      s.wide() * 4 * s.b * s.d + labels;
  if (s.mixed) return lstm + s.wide() * 2 * positions + positions + 2 * s.d * s.d;
  return lstm + (s.b > 1 ? 3 : 2) * positions;
}

// Mixed (measured: the kept bytes exact): the predictor's LSTM, the sample-wise loss's gradient
// sums and the batched reference's log-softmax are float32 (`wide`); the batched joint keeps its
// output weight's cast. Its peak on a CPU is not modelled: oneDNN's bfloat16 matrix products keep
// float32 copies of their operands (docs/speech.md).
void joint_memory(const TransducerConfig& config, const TransducerShape& s, LayerWork& work) {
  const double positions = s.b * s.t * s.u;
  const double predictor = predictor_values(s);
  if (config.sample_wise) {
    // Kept: d(enc), d(pred) and the joint's parameter gradients. At the peak, one utterance's
    // joint: tanh activation, logits overwritten by their gradient, the tanh and matrix
    // gradients (3 d + v per position), beside pred and the stage's output.
    work.stashed_values = predictor + s.wide() * (s.b * s.u * s.d + s.b * s.t * s.d + s.d * s.v + s.v);
    work.workspace_values = s.b * s.u * s.d + s.b * s.t * (s.d + 1) + s.t * s.u * (3 * s.d + s.v) +
                            (s.t + s.u + s.v) * s.d;
  } else {
    // Kept: the whole tanh activation and log-softmax (d + v per position), two [rows, labels]
    // values per frame of the alpha recursion after the first, the padded targets. At the peak,
    // the tanh backward's two gradients once the log-softmax is freed, or the log-softmax
    // backward's three [rows, frames, labels + 1, v] gradients.
    const double v = s.wide() * s.v;
    work.stashed_values = predictor + positions * (s.d + v) + s.wide() * 2 * s.b * (s.t - 1) * s.u +
                          s.b * (s.u - 1) * s.index() + (s.mixed ? s.v * s.d : 0);
    work.workspace_values = positions * std::max(2 * s.d - v - 2, 3 * v - 2);
  }
}

// The joint layer's products: the encoder's projection, the predictor (its LSTM's 8 d^2 and
// projection's d^2 a label), and the joint network over every (frame, label) pair of
// max_labels / 2 labels on average (d v + d a pair). Its memory-bound passes a pair, counted
// from the code as a CPU runs it (float32, `wide` under mixed precision) in values read and
// written: over the d-wide hidden, the broadcast sum (1), tanh as 2 sigmoid(2x) - 1 (8:
// loss/joint_network.cpp), and in the backward the hidden's gradient (1), tanh's backward (3)
// and the sums back to enc and pred (2); over the v logits, their product's output (1), the
// log-softmax's denominators (4) and the gradient written over them (4: add, exp), or the
// batched reference's log-softmax (3) and its backward (3). The sample-wise loss does the
// joint's backward in its forward, so its layer's backward is the projections' and the
// predictor's alone. Not counted: the lattice's T U recursion, the predictor's step by step
// launches.
void joint_time(const TransducerConfig& config, const TransducerShape& s, LayerWork& work) {
  const double labels = double(config.max_labels) / 2 + 1, pairs = s.b * s.t * labels;
  const double projections = 2 * s.b * (s.t * s.d * s.d + labels * 9 * s.d * s.d);
  const double joint = 2 * pairs * (s.d * s.v + s.d);
  if (config.sample_wise) {
    work.forward_flops = projections + 3 * joint;
    work.forward_traffic_values = s.wide() * pairs * (15 * s.d + 9 * s.v);
    work.backward_flops = 2 * projections;
    work.backward_traffic_values = 0;
  } else {
    // Over the padded batch: every utterance's pairs at the longest label count (full length).
    const double padded = s.b * s.t * s.u;
    work.forward_flops = projections + 2 * padded * (s.d * s.v + s.d);
    work.forward_traffic_values = s.wide() * padded * (9 * s.d + 4 * s.v);
    work.backward_traffic_values = s.wide() * padded * (6 * s.d + 3 * s.v);
  }
}

}  // namespace

// Matrix products and convolutions (2 FLOPs per multiply-add); the joint layer: joint_time.
LayerWork TransducerModel::layer_work(int64_t layer, int64_t rows) const {
  const double b = double(rows), t = double(config_.encoder_frames()), d = double(config_.d_model);
  const double c = double(config_.conv_channels()), bins = double(config_.mel_bins);
  const double v = double(config_.vocabulary);
  const TransducerShape shape{b, t, d, double(config_.max_labels + 1), v, double(config_.heads),
                              config_.precision.activation_bytes(),
                              config_.precision.mixed(), config_.dtype != torch::kFloat64};
  LayerWork work;
  work.output_values = b * t * (d + 1);
  if (layer == 0) {
    const double conv1 = 2 * b * (2 * t) * (bins / 2) * c * 9,
                 conv2 = 2 * b * t * (bins / 4) * c * c * 9;
    work.forward_flops = conv1 + conv2 + 2 * b * t * c * (bins / 4) * d;
    work.parameters = 10 * c + c * c * 9 + c + c * (bins / 4) * d + d;
    subsample_memory(config_, shape, work);
  } else if (layer == config_.layer_count() - 1) {
    work.parameters = 2 * (d * d + d) + v * d + 8 * d * d + 8 * d + d * v + v;
    joint_time(config_, shape, work);
    joint_memory(config_, shape, work);
  } else {
    work.forward_flops = 2 * b * t * 12 * d * d + 4 * b * t * t * d;
    work.parameters = 12 * d * d + 13 * d;
    encoder_memory(shape, work);
  }
  return work;
}

// Full-length random features and random label counts (the profiler's).
Microbatch TransducerModel::example(int64_t rows, torch::Generator& generator) const {
  auto inputs = torch::randn({rows, config_.max_frames, config_.mel_bins + 1}, generator,
                             torch::dtype(config_.dtype));
  inputs.select(2, config_.mel_bins).fill_(1.0);  // every frame within its utterance
  auto labels = torch::randint(1, config_.vocabulary, {rows, 1 + config_.max_labels}, generator,
                               torch::kInt64);
  labels.select(1, 0).copy_(
      torch::randint(1, config_.max_labels + 1, {rows}, generator, torch::kInt64));
  return {inputs, labels};
}

}  // namespace pipetrain
