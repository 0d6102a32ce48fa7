#pragma once
// One stage's memory as the counting allocator sees it, for the memory-model tests
// (model_memory_test.cpp, transducer_memory_test.cpp): the bytes its forward keeps for the
// backward, its high-water mark over forward and backward, and its split backward's.
#include <torch/torch.h>

#include "model/model.h"
#include "runtime/memory_accounting.h"
#include "runtime/split_backward.h"

namespace pipetrain::runtime {

// ATen's own CPU matrix products while it lives: oneDNN's bfloat16 ones take a scratch buffer
// each from the allocator (70-230 KB at the tests' shapes, by the operands' shapes, layouts and
// the CPU's instructions), which the memory models leave out (a GPU's cuBLAS keeps one workspace
// for the process).
struct WithoutOneDnn {
  WithoutOneDnn() { at::globalContext().setUserEnabledMkldnn(false); }
  ~WithoutOneDnn() { at::globalContext().setUserEnabledMkldnn(was_enabled); }
  WithoutOneDnn(const WithoutOneDnn&) = delete;
  WithoutOneDnn& operator=(const WithoutOneDnn&) = delete;
  const bool was_enabled = at::globalContext().userEnabledMkldnn();
};

struct MeasuredStageMemory {
  double stashed = 0, peak = 0;  // bytes above what existed before the forward
};

// Forward and backward of `stage` as the stage executor runs them: a middle stage keeps its
// output, the last stage only its loss. The second of two rounds (the first allocates gradients).
inline MeasuredStageMemory measure_stage_memory(StageModule& stage, const torch::Tensor& input,
                                                const torch::Tensor& labels, bool last) {
  CountingAllocator& allocator = CountingAllocator::install();
  MeasuredStageMemory measured;
  for (int round = 0; round < 2; ++round) {
    const int64_t before = allocator.live_bytes();
    allocator.reset_peak();
    torch::Tensor root = stage.forward(input);
    if (last) root = stage.loss(root, labels);
    measured.stashed = double(allocator.live_bytes() - before);
    root.backward(last ? torch::Tensor() : torch::ones_like(root));
    measured.peak = double(allocator.peak_bytes() - before);
  }
  return measured;
}

// Zero-bubble's split backward of `stage` once its weights hold gradients (the second of two
// rounds of forward, B and W, as runtime::SplitBackward runs them): each pass's high-water mark
// above what was held at its start (B's includes what it records and its input's gradient).
struct MeasuredSplitBackward {
  double input_pass = 0, weight_pass = 0;
};
inline MeasuredSplitBackward measure_split_backward(StageModule& stage, const torch::Tensor& input,
                                                    const torch::Tensor& labels, bool last) {
  CountingAllocator& allocator = CountingAllocator::install();
  MeasuredSplitBackward measured;
  for (int round = 0; round < 2; ++round) {
    torch::Tensor root = stage.forward(input);
    if (last) root = stage.loss(root, labels);
    const torch::Tensor seed = torch::ones_like(root);
    int64_t before = allocator.live_bytes();
    allocator.reset_peak();
    SplitBackward pass({root}, {seed}, input, stage.parameters());
    measured.input_pass = double(allocator.peak_bytes() - before);
    root = torch::Tensor();
    before = allocator.live_bytes();
    allocator.reset_peak();
    pass.weight_pass();
    measured.weight_pass = double(allocator.peak_bytes() - before);
    input.mutable_grad() = torch::Tensor();
  }
  return measured;
}

}  // namespace pipetrain::runtime
