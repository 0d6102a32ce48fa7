#pragma once
// How the single process launches a step's forward and backward: eagerly, kernel by kernel, or
// (Execution::graphs, train.cuda_graphs) captured once as a CUDA graph and replayed, so
// that the host launches a GPT-2 small step's ~1,400 kernels in one call (docs/architecture.md,
// "CUDA graphs"). The trainer's code is the same for both; this is the one place that knows.
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "device/execution.h"

namespace pipetrain::device {

class StepRunner {
 public:
  // A step's device work, from its inputs to the tensors the host reads afterwards. Graphed, it
  // must not wait for the device, and it runs its host code only while being captured: what
  // it reads besides its inputs (the module's parameters, their gradients) must stay where it
  // is between steps, which in-place optimizer updates keep.
  using Body = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)>;
  virtual ~StepRunner() = default;
  // body's outputs for `inputs` (on the runner's device). Graphed, the outputs are the same
  // tensors every step: read them before the next run.
  virtual std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, const Body& body) = 0;
};

// Eager unless execution.graphs is Captured (runtime/run_spec.cpp refuses Emulated for the one
// process: its body has no bookkeeping to emulate). A graphed runner makes a CUDA stream of its own the
// calling thread's current one for its lifetime (capture needs one that is not the default
// stream), so every later kernel of the thread (optimizer, validation) stays ordered with it. It
// runs its first 3 steps eagerly and captures the 4th; a step that cannot be captured, or a
// batch of another shape later, makes it eager for the rest of the run (one line on stderr).
std::unique_ptr<StepRunner> make_step_runner(const Execution& execution, const c10::Device& device);

}  // namespace pipetrain::device
