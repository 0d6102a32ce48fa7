// The eager step runner (every CPU run, and GPU runs without train.cuda_graphs) hands the body its
// inputs and returns its outputs untouched, every step. The graphed runner needs a GPU:
// bench/gpu_check.sh checks it (bitwise equal to eager, and its fallbacks).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "device/execution.h"
#include "device/step_runner.h"

namespace pipetrain::device {
namespace {

TEST(StepRunner, EagerRunsTheBodyOnItsInputsEveryStep) {
  const auto runner = make_step_runner(decide_execution("cpu", "float64", 1, Hardware{0}), c10::Device("cpu"));
  const auto weight = torch::tensor({2.0}, torch::kFloat64);
  for (int step = 1; step <= 5; ++step) {  // past the step a graphed runner would capture
    const auto inputs = std::vector<at::Tensor>{torch::full({3}, double(step), torch::kFloat64)};
    int calls = 0;
    const auto outputs = runner->run(inputs, [&](const std::vector<at::Tensor>& in) {
      ++calls;
      EXPECT_TRUE(in[0].is_same(inputs[0]));  // no copy on the eager path
      return std::vector<at::Tensor>{(in[0] * weight).sum()};
    });
    EXPECT_EQ(calls, 1);
    ASSERT_EQ(outputs.size(), 1u);
    EXPECT_DOUBLE_EQ(outputs[0].item<double>(), 6.0 * step);
  }
}

}  // namespace
}  // namespace pipetrain::device
