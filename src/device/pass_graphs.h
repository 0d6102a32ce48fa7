#pragma once
// A pipeline worker's forward and backward of one microbatch on one model chunk, captured once
// per slot as two CUDA graphs and replayed (train.cuda_graphs on pipeline workers): the host
// launches each pass in one call instead of its hundreds of kernels. A slot holds one microbatch
// in flight (its inputs, the activations its backward reads, its outputs); a chunk needs as many
// slots as its schedule keeps microbatches in flight. Transfers, the update and validation stay
// eager, between the replays. With step_runner.h and graph_capture.h, the only files that know
// CUDA graphs.
//
// Emulated (Graphs::Emulated), the same slots and copies run the passes eagerly on any device,
// so the CPU tests check everything but the capture itself.
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "device/execution.h"

namespace pipetrain::device {

struct Passes {
  // From a slot's inputs (the first may require its gradient) to the tensors the backward
  // starts from, and any the host reads afterwards. Graphed, it must not wait for the device.
  std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs)> forward;
  // The backward from the forward's outputs and the incoming gradients (as many as it needs);
  // returns what leaves the slot (the inputs' gradients). It accumulates into the parameters'
  // gradients, which must exist (zeros) before the capture and never move afterwards.
  std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>& inputs,
                                        const std::vector<at::Tensor>& outputs,
                                        const std::vector<at::Tensor>& grads)>
      backward;
};

// A worker's slots, per model chunk it holds.
class PassGraphs {
 public:
  virtual ~PassGraphs() = default;
  // Runs its first steps eagerly before prepare() (libraries set themselves up outside a capture).
  virtual int eager_steps() const = 0;
  // Makes `slots` slots of `chunk` for inputs and gradients of the shapes, dtypes and
  // requires_grad of `inputs` and `grads` (their values do not matter: nothing runs). False if
  // the passes cannot be captured (they wait for the device, say): every chunk then runs eagerly.
  virtual bool prepare(int chunk, int slots, const std::vector<at::Tensor>& inputs,
                       const std::vector<at::Tensor>& grads, const Passes& passes) = 0;
  // The forward on `inputs` copied into the slot: its outputs, copied out (the slot's are
  // overwritten by its next forward).
  std::vector<at::Tensor> forward(int chunk, int slot, const std::vector<at::Tensor>& inputs);
  // The backward of the slot's last forward from `grads`: what it returns, copied out.
  std::vector<at::Tensor> backward(int chunk, int slot, const std::vector<at::Tensor>& grads);

 protected:
  // A slot's fixed tensors: what each call copies into, and what its passes made there.
  struct Slot {
    std::vector<at::Tensor> inputs, grads, outputs, results;
  };
  // What a slot's passes do, run eagerly or recorded by a capture.
  static void forward_in(Slot& slot, const Passes& passes);
  static void backward_in(Slot& slot, const Passes& passes);  // the inputs' gradients made anew
  virtual Slot& slot_of(int chunk, int slot) = 0;
  // The slot's outputs from its inputs; its results from its gradients (how: captured or eager).
  virtual void run_forward(int chunk, int slot) = 0;
  virtual void run_backward(int chunk, int slot) = 0;
};

// For execution.graphs Captured (a CUDA device: the calling thread's stream becomes one of the
// pool's for the object's lifetime, as capture needs) or Emulated; null when Off.
std::unique_ptr<PassGraphs> make_pass_graphs(const Execution& execution, const c10::Device& device);

}  // namespace pipetrain::device
