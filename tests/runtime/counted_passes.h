#pragma once
// What a stage's forward and its backward call, as counted_work counts them, for the tests that
// hold a layer's analytic work (Model::layer_work) to it: model_traffic_test.cpp and
// cnn_memory_test.cpp.
#include <torch/torch.h>

#include "model/model.h"
#include "model/op_work.h"

namespace pipetrain::runtime {

struct CountedPasses {
  CountedWork forward, backward;
};

// The stage's forward of `input`, then a backward from its output (seeded with ones: the next
// stage's work, not counted).
inline CountedPasses counted_passes(StageModule& stage, const torch::Tensor& input) {
  torch::Tensor output;
  CountedPasses passes;
  passes.forward = counted_work([&] { output = stage.forward(input); });
  const torch::Tensor seed = torch::ones_like(output);
  passes.backward = counted_work([&] { output.backward(seed); });
  return passes;
}

// The last stage's: its forward and its loss over `targets`, then the backward from the loss.
inline CountedPasses counted_passes(StageModule& stage, const torch::Tensor& input,
                                    const torch::Tensor& targets) {
  torch::Tensor loss;
  CountedPasses passes;
  passes.forward = counted_work([&] { loss = stage.loss(stage.forward(input), targets); });
  passes.backward = counted_work([&] { loss.backward(); });
  return passes;
}


}  // namespace pipetrain::runtime
