#pragma once
// A small ResNet-style image classifier written as an ordered list of layers: [stem, residual
// block 0 .. B-1, head], so a pipeline can cut it into stages at any layer boundary. Layer i is
// initialised from its own generator seeded by (seed, i): any subset of layers built anywhere
// gets the same weights. Every convolution is followed by BatchNorm (docs/models.md: how its
// statistics behave under microbatches).
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "device/precision.h"
#include "model/model.h"

namespace pipetrain {

struct CnnConfig {
  int64_t blocks = 3;     // residual blocks (model.layers)
  int64_t channels = 16;  // the stem's width; blocks 1 and 2 each halve the resolution and double it
  int64_t image_size = 28;
  int64_t image_channels = 1;
  int64_t classes = 10;
  torch::ScalarType dtype = torch::kFloat32;
  device::Precision precision;  // mixed: layers compute in a ComputeScope, hand on at_boundary

  int64_t layer_count() const { return blocks + 2; }  // stem + blocks + head
  // The activation layer `layer` hands on: {channels, height, width} (the head: {classes}).
  std::vector<int64_t> output_shape(int64_t layer) const;
  // Block b's input and output: {channels in, channels out, stride, output size}.
  struct BlockShape {
    int64_t in, out, stride, size;
  };
  BlockShape block_shape(int64_t block) const;
};

// The layers [first, last) of the CNN; images [B, C, H, W] in, class logits [B, classes] out
// of the head, cross-entropy against int64 labels [B].
class CnnLayer : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

class CnnStack : public StageModule {
 public:
  CnnStack(const CnnConfig& config, uint64_t seed, int64_t first, int64_t last);
  torch::Tensor forward(const torch::Tensor& input) override;
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& labels) override;
  std::vector<std::pair<std::string, double>> validation_measures(
      const torch::Tensor& logits, const torch::Tensor& labels) override;

 private:
  std::vector<std::shared_ptr<CnnLayer>> layers_;
  device::Precision precision_;
};

}  // namespace pipetrain
