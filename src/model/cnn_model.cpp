#include "model/cnn_model.h"

#include <fmt/format.h>

#include "model/registry.h"

namespace pipetrain {
namespace {

double product_of(const std::vector<int64_t>& shape) {
  double n = 1;
  for (const int64_t d : shape) n *= double(d);
  return n;
}

// A convolution's multiply-adds (2 FLOPs each) and weights, and its BatchNorm's gain and bias.
struct ConvWork {
  double flops, parameters;
};
ConvWork conv_work(double rows, int64_t in, int64_t out, int64_t kernel, int64_t size) {
  const double weights = double(in * out * kernel * kernel);
  return {2 * rows * double(size * size) * weights, weights + 2 * double(out)};
}

}  // namespace

CnnConfig cnn_config_from(const ModelConfig& model) {
  CnnConfig config;
  config.blocks = model.layers;
  config.channels = model.d_model;
  config.precision = model_precision(model);
  config.dtype = config.precision.parameter_dtype();
  return config;
}

std::string CnnModel::describe() const {
  return fmt::format("CNN {} residual blocks, {} base channels", config_.blocks, config_.channels);
}

std::string CnnModel::layer_name(int64_t layer) const {
  if (layer == 0) return "stem";
  if (layer == config_.layer_count() - 1) return "head";
  return fmt::format("block{}", layer - 1);
}

std::shared_ptr<StageModule> CnnModel::make_stage(int64_t first, int64_t last) const {
  return std::make_shared<CnnStack>(config_, seed_, first, last);
}

TensorSpec CnnModel::input_spec(int64_t rows) const {
  return {{rows, config_.image_channels, config_.image_size, config_.image_size}, config_.dtype};
}

TensorSpec CnnModel::boundary_spec(int64_t boundary, int64_t rows) const {
  std::vector<int64_t> shape = {rows};
  for (const int64_t d : config_.output_shape(boundary - 1)) shape.push_back(d);
  return {shape, config_.precision.activation_dtype()};
}

// Convolutions and the classifier as FLOPs; BatchNorm, ReLU, the residual sum and pooling, a few
// FLOPs per value, as memory traffic.
LayerWork CnnModel::layer_work(int64_t layer, int64_t rows) const {
  const double b = double(rows);
  LayerWork work;
  work.output_values = b * product_of(config_.output_shape(layer));
  ConvWork total{0, 0};
  const auto add = [&](ConvWork w) {
    total.flops += w.flops;
    total.parameters += w.parameters;
  };
  // What autograd keeps for the backward, in outputs' sizes: each convolution's output (its
  // BatchNorm's input) and each ReLU's output (the last is the layer's output); a BatchNorm's
  // output feeds a ReLU or the sum, which keep nothing of it. The backward's transients, at a
  // block's first convolution: the gradient arriving and the BatchNorm's (outputs' sizes), the
  // convolution's and the shortcut's input gradients (inputs' sizes), and oneDNN's scratch (about
  // two outputs' sizes; tests/runtime/cnn_memory_test.cpp measures them).
  const double out = work.output_values;
  const double in = layer == 0 ? 0 : b * product_of(config_.output_shape(layer - 1));
  // Memory-bound passes over a convolution's output: its BatchNorm reads it twice (statistics,
  // then normalisation) and writes it once, a ReLU or the residual sum reads and writes (the sum
  // reads two).
  const double batch_norm = 3, relu = 2, residual_sum = 3;
  // Operators (counted_work's, CnnLayerMemory.OperatorsAreTheCountedOnes): a convolution, its
  // BatchNorm (and, training, the count of batches it tracks) and a ReLU, 4 forward; backward
  // one each, 3. A block: two of those, the second ReLU after the residual sum (9; projected:
  // the shortcut's convolution and BatchNorm, 12); backward the six (eight) and the gradients'
  // sum at its input. The head: pooling and the linear; backward its three products and the
  // pooling's.
  if (layer == 0) {
    work.forward_operators = 4;
    work.backward_operators = 3;
    add(conv_work(b, config_.image_channels, config_.channels, 3, config_.image_size));
    work.stashed_values = 2 * out;  // conv, relu
    work.workspace_values = 4 * out;
    work.forward_traffic_values = (batch_norm + relu) * out;
  } else if (layer == config_.layer_count() - 1) {
    const double features = double(config_.output_shape(layer - 1).at(0));
    const double classes = double(config_.classes);
    total = {2 * b * features * classes, (features + 1) * classes};
    work.stashed_values = out + b * features;  // the logits and the pooled features the linear keeps
    work.workspace_values = in;  // the pooling's input gradient
    work.forward_traffic_values = in;  // the pooling reads its input
    work.forward_operators = 2;
    work.backward_operators = 4;
  } else {
    const auto shape = config_.block_shape(layer - 1);
    add(conv_work(b, shape.in, shape.out, 3, shape.size));
    add(conv_work(b, shape.out, shape.out, 3, shape.size));
    const bool projected = shape.stride != 1 || shape.in != shape.out;
    if (projected) add(conv_work(b, shape.in, shape.out, 1, shape.size));
    work.stashed_values = (projected ? 5 : 4) * out;  // conv1, relu1, conv2, (shortcut conv,) relu
    work.workspace_values = 4 * out + 2 * in;
    const double norms = projected ? 3 : 2;
    work.forward_traffic_values = (norms * batch_norm + 2 * relu + residual_sum) * out;
    work.forward_operators = 3 * norms + 3;
    work.backward_operators = 2 * norms + 3;
  }
  work.forward_flops = total.flops;
  work.parameters = total.parameters;
  return work;
}

Microbatch CnnModel::example(int64_t rows, torch::Generator& generator) const {
  const TensorSpec images = input_spec(rows);
  return {torch::randn(images.shape, generator, torch::dtype(images.dtype)),
          torch::randint(0, config_.classes, {rows}, generator, torch::kInt64)};
}

}  // namespace pipetrain
