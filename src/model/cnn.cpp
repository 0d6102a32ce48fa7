#include "model/cnn.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"

namespace pipetrain {
namespace {

torch::Generator cnn_layer_generator(uint64_t seed, int64_t layer) {
  // splitmix-style mixing (as the GPT's layers), offset so a CNN and a GPT seeded alike differ
  uint64_t z = (seed ^ 0xC11u) * 0x9E3779B97F4A7C15ull +
               static_cast<uint64_t>(layer + 1) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 30)) * 0x94D049BB133111EBull;
  return at::detail::createCPUGenerator(z ^ (z >> 31));
}

// A 3x3 (or 1x1) convolution without bias (BatchNorm follows), He-initialised for ReLU.
torch::nn::Conv2d make_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride,
                            torch::Generator& generator) {
  torch::nn::Conv2d conv(torch::nn::Conv2dOptions(in, out, kernel)
                             .stride(stride)
                             .padding(kernel / 2)
                             .bias(false));
  torch::NoGradGuard no_grad;
  conv->weight.normal_(0.0, std::sqrt(2.0 / double(in * kernel * kernel)), generator);
  return conv;
}

torch::nn::BatchNorm2d make_norm(int64_t channels) {
  return torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(channels));
}

class CnnStem : public CnnLayer {
 public:
  CnnStem(const CnnConfig& config, torch::Generator& generator)
      : conv_(register_module("conv", make_conv(config.image_channels, config.channels, 3, 1, generator))),
        norm_(register_module("bn", make_norm(config.channels))) {}
  torch::Tensor forward(const torch::Tensor& x) override { return torch::relu(norm_(conv_(x))); }

 private:
  torch::nn::Conv2d conv_;
  torch::nn::BatchNorm2d norm_;
};

// relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)); the shortcut a strided 1x1 convolution
// with its BatchNorm where the shape changes.
class ResidualBlock : public CnnLayer {
 public:
  ResidualBlock(const CnnConfig::BlockShape& shape, torch::Generator& generator)
      // (in the members' order, which is the order they are made and registered in)
      : conv1_(register_module("conv1", make_conv(shape.in, shape.out, 3, shape.stride, generator))),
        conv2_(register_module("conv2", make_conv(shape.out, shape.out, 3, 1, generator))),
        bn1_(register_module("bn1", make_norm(shape.out))),
        bn2_(register_module("bn2", make_norm(shape.out))) {
    if (shape.stride != 1 || shape.in != shape.out) {
      shortcut_conv_ = register_module("shortcut", make_conv(shape.in, shape.out, 1, shape.stride, generator));
      shortcut_bn_ = register_module("shortcut_bn", make_norm(shape.out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) override {
    const auto branch = bn2_(conv2_(torch::relu(bn1_(conv1_(x)))));
    const auto shortcut = shortcut_conv_ ? shortcut_bn_(shortcut_conv_(x)) : x;
    return torch::relu(branch + shortcut);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_, shortcut_conv_{nullptr};
  torch::nn::BatchNorm2d bn1_, bn2_, shortcut_bn_{nullptr};
};

// Global average pooling, then the class logits.
class ClassifierHead : public CnnLayer {
 public:
  ClassifierHead(const CnnConfig& config, torch::Generator& generator)
      : linear_(register_module("fc", torch::nn::Linear(config.output_shape(config.blocks).at(0),
                                                        config.classes))) {
    torch::NoGradGuard no_grad;
    linear_->weight.normal_(0.0, 1.0 / std::sqrt(double(linear_->weight.size(1))), generator);
    linear_->bias.zero_();
  }
  torch::Tensor forward(const torch::Tensor& x) override { return linear_(x.mean({2, 3})); }

 private:
  torch::nn::Linear linear_;
};

}  // namespace

CnnConfig::BlockShape CnnConfig::block_shape(int64_t block) const {
  // Blocks 1 and 2 halve the resolution (28 -> 14 -> 7) and double the width; the rest keep it.
  BlockShape shape{channels, channels, 1, image_size};
  for (int64_t b = 1; b <= block; ++b) {
    shape.in = shape.out;
    shape.stride = b <= 2 ? 2 : 1;
    shape.out = shape.in * shape.stride;
    shape.size = (shape.size + shape.stride - 1) / shape.stride;
  }
  return shape;
}

std::vector<int64_t> CnnConfig::output_shape(int64_t layer) const {
  if (layer == 0) return {channels, image_size, image_size};
  if (layer == layer_count() - 1) return {classes};
  const BlockShape shape = block_shape(layer - 1);
  return {shape.out, shape.size, shape.size};
}

CnnStack::CnnStack(const CnnConfig& config, uint64_t seed, int64_t first, int64_t last)
    : precision_(config.precision) {
  if (first < 0 || last > config.layer_count() || first >= last) {
    fail("layer range [{}, {}) is outside the model's {} layers", first, last, config.layer_count());
  }
  for (int64_t i = first; i < last; ++i) {
    auto generator = cnn_layer_generator(seed, i);
    std::shared_ptr<CnnLayer> layer;
    if (i == 0) {
      layer = std::make_shared<CnnStem>(config, generator);
    } else if (i == config.layer_count() - 1) {
      layer = std::make_shared<ClassifierHead>(config, generator);
    } else {
      layer = std::make_shared<ResidualBlock>(config.block_shape(i - 1), generator);
    }
    layers_.push_back(register_module("layer" + std::to_string(i), layer));
  }
  to(config.dtype);  // initialised in float32, converted exactly
}

torch::Tensor CnnStack::forward(const torch::Tensor& input) {
  device::ComputeScope scope(precision_, input.device().type());
  torch::Tensor x = input;
  for (auto& layer : layers_) x = device::at_boundary(layer->forward(x), precision_);
  return x;
}

torch::Tensor CnnStack::loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(device::at_least_float32(logits), labels);
}

std::vector<std::pair<std::string, double>> CnnStack::validation_measures(
    const torch::Tensor& logits, const torch::Tensor& labels) {
  const double correct = logits.argmax(1).eq(labels).sum().item<double>();
  return {{"accuracy", correct / double(labels.size(0))}};
}

}  // namespace pipetrain
