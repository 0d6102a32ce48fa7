#include "device/step_runner.h"

#include <string>

#include <fmt/format.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "device/graph_capture.h"

namespace pipetrain::device {
namespace {

class EagerSteps : public StepRunner {
 public:
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, const Body& body) override {
    return body(inputs);
  }
};

std::string shape_of(const std::vector<at::Tensor>& tensors) {
  std::string text;
  for (const auto& t : tensors) text += (text.empty() ? "" : ", ") + c10::str(t.sizes());
  return text;
}

// Steps 1 to kEagerSteps run eagerly on the runner's stream (libraries set themselves up: cuBLAS
// workspaces, autograd's streams); the next is captured, then replayed from then on. The captured
// step's memory (activations, gradients) stays in the graph's private pool. A step that cannot be
// captured (it waits for the device: a loss that reads a count, say) or a batch of another shape
// makes the run go on eagerly, said once: the results are the same either way.
class GraphedSteps : public StepRunner {
 public:
  explicit GraphedSteps(const c10::Device& device)
      : device_(device), stream_(idle_capture_stream(device)), guard_(stream_) {}

  std::vector<at::Tensor> run(const std::vector<at::Tensor>& inputs, const Body& body) override {
    const int step = ++steps_;
    if (eager_ || step <= kEagerSteps) return body(inputs);
    if (!graph_) {
      if (!capture(inputs, body)) return body(inputs);
    } else if (const std::string other = other_shapes(inputs); !other.empty()) {
      go_eager(fmt::format("step {} has batches of shape {}, the captured step {}; a graph replays "
                           "fixed shapes", step, shape_of(inputs), other));
      return body(inputs);
    } else {
      for (size_t i = 0; i < inputs.size(); ++i) {
        static_inputs_[i].copy_(inputs[i], /*non_blocking=*/true);
      }
    }
    graph_->replay();
    return outputs_;
  }

 private:
  static constexpr int kEagerSteps = 3;

  // Captures body on copies of `inputs`; false (and eager from now on) if it cannot be.
  bool capture(const std::vector<at::Tensor>& inputs, const Body& body) {
    for (const auto& input : inputs) static_inputs_.push_back(input.clone());
    c10::cuda::device_synchronize();
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    pool_ = at::cuda::graph_pool_handle();
    try {
      graph_->capture_begin(pool_);
      outputs_ = body(static_inputs_);
      graph_->capture_end();
      return true;
    } catch (const std::exception& e) {
      abandon_capture(*graph_, device_, pool_);
      go_eager(fmt::format("step {} could not be captured as a CUDA graph ({})", steps_,
                           first_line(e.what())));
      return false;
    }
  }

  // The rest of the run eager: the gradients leave the graph's pool at the next zero_grad.
  void go_eager(const std::string& why) {
    fmt::print(stderr, "pipetrain: train.cuda_graphs: {}; the run goes on without graphs (same "
               "results, every kernel launched from the host)\n", why);
    eager_ = true;
    outputs_.clear();
    static_inputs_.clear();
    graph_.reset();
  }

  // "" when `inputs` have the captured step's shapes, else those shapes.
  std::string other_shapes(const std::vector<at::Tensor>& inputs) const {
    bool same = inputs.size() == static_inputs_.size();
    for (size_t i = 0; same && i < inputs.size(); ++i) {
      same = inputs[i].sizes() == static_inputs_[i].sizes();
    }
    return same ? std::string() : shape_of(static_inputs_);
  }

  c10::Device device_;
  c10::cuda::CUDAStream stream_;
  c10::cuda::CUDAStreamGuard guard_;
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  at::cuda::MempoolId_t pool_{0, 0};
  int steps_ = 0;
  bool eager_ = false;
  std::vector<at::Tensor> static_inputs_, outputs_;
};

}  // namespace

std::unique_ptr<StepRunner> make_step_runner(const Execution& execution, const c10::Device& device) {
  if (execution.graphs == Graphs::Captured) return std::make_unique<GraphedSteps>(device);
  return std::make_unique<EagerSteps>();
}

}  // namespace pipetrain::device
