#pragma once
// A pipeline worker's forward and backward of one microbatch on one model chunk, captured once
// per slot as CUDA graphs and replayed (train.cuda_graphs on pipeline workers): the host
// launches each pass in one call instead of its hundreds of kernels. A slot holds one microbatch
// in flight (its inputs, the activations its backward reads, its outputs); a chunk needs as many
// slots as its schedule keeps microbatches in flight. A microbatch cut into token slices is one
// slot of several *parts* (a pass each per slice: forward in order, backward in reverse).
// Transfers, the update and validation stay eager, between the replays. With step_runner.h and
// graph_capture.h, the only files that know CUDA graphs.
//
// Emulated (Graphs::Emulated), the same slots and copies run the passes eagerly on any device,
// so the CPU tests check everything but the capture itself.
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Device.h>

#include "device/execution.h"

namespace pipetrain::device {

// What a backward leaves: the inputs' gradients and, when it is split (zero-bubble's B), the
// weight pass still to run (W: it adds the parameters' gradients later); empty when whole.
struct Backward {
  std::vector<at::Tensor> input_grads;
  std::function<void()> weight_pass;
};

// One slot's passes (a slot's own: they may keep state between its parts, a token slice's K/V).
struct Passes {
  // From a part's inputs (the first may require its gradient) to the tensors the backward
  // starts from, and any the host reads afterwards. Graphed, it must not wait for the device.
  std::function<std::vector<at::Tensor>(int part, const std::vector<at::Tensor>& inputs)> forward;
  // The part's backward from its forward's outputs and the incoming gradients (as many as it
  // needs). It accumulates into the parameters' gradients, which must exist (zeros) before the
  // capture and never move afterwards.
  std::function<Backward(int part, const std::vector<at::Tensor>& inputs,
                         const std::vector<at::Tensor>& outputs,
                         const std::vector<at::Tensor>& grads)>
      backward;
  // No pass reads what an earlier pass of the slot made (the backward recomputes the forward
  // from the inputs and is whole; one part): nothing in a slot's memory outlives a pass, and the
  // captures share one pool.
  bool independent = false;
};

// The shapes, dtypes and requires_grad of a part's inputs and incoming gradients (their values
// do not matter: nothing runs at a capture).
struct PartExample {
  std::vector<at::Tensor> inputs, grads;
};

// A worker's slots, per model chunk it holds.
class PassGraphs {
 public:
  virtual ~PassGraphs() = default;
  // Runs its first steps eagerly before prepare() (libraries set themselves up outside a capture).
  virtual int eager_steps() const = 0;
  // Makes `slots` slots of `chunk`, each of `parts` parts like the examples, each slot with
  // passes of its own from `make_passes`. False if the passes cannot be captured (they wait for
  // the device, say): every chunk then runs eagerly.
  virtual bool prepare(int chunk, int slots, const std::vector<PartExample>& parts,
                       const std::function<Passes()>& make_passes) = 0;
  // The part's forward on `inputs` copied into the slot: its outputs, copied out (the slot's are
  // overwritten by its next forward).
  std::vector<at::Tensor> forward(int chunk, int slot, int part,
                                  const std::vector<at::Tensor>& inputs);
  // The backward of the part's last forward from `grads`: the inputs' gradients, copied out.
  std::vector<at::Tensor> backward(int chunk, int slot, int part,
                                   const std::vector<at::Tensor>& grads);
  // The weight pass a split backward of the slot left (zero-bubble's W; one part).
  void weight(int chunk, int slot);
  // The device bytes the slots' memory pools hold that no live tensor does: the replays'
  // activations and temporaries, which the allocator's count of allocated bytes never sees (it
  // sees only the tensors left in the pools). Fixed once prepared; 0 emulated.
  virtual int64_t pool_bytes_beyond_tensors() const { return 0; }

 protected:
  // A part's fixed tensors: what each call copies into, and what its passes made there.
  struct Part {
    std::vector<at::Tensor> inputs, grads, outputs, results;
  };
  struct Slot {
    std::vector<Part> parts;
    Passes passes;
    std::function<void()> weight_pass;  // a split backward's, until it runs
  };
  static Slot make_slot(const std::vector<PartExample>& parts, Passes passes);
  // What a slot's passes do, run eagerly or recorded by a capture.
  static void forward_in(Slot& slot, int part);
  static void backward_in(Slot& slot, int part);  // the inputs' gradients made anew
  static void weight_in(Slot& slot);
  virtual Slot& slot_of(int chunk, int slot) = 0;
  // A part's outputs from its inputs; its results from its gradients; the slot's weight pass
  // (how: captured or eager).
  virtual void run_forward(int chunk, int slot, int part) = 0;
  virtual void run_backward(int chunk, int slot, int part) = 0;
  virtual void run_weight(int chunk, int slot) = 0;
};

// Of the caching allocator's segments, the bytes of those owned by one of `pools` that no
// allocated block covers.
int64_t unallocated_pool_bytes(
    const std::vector<c10::CachingDeviceAllocator::SegmentInfo>& segments,
    const std::vector<c10::MempoolId_t>& pools);

// For execution.graphs Captured (a CUDA device: the calling thread's stream becomes one of the
// pool's for the object's lifetime, as capture needs) or Emulated; null when Off.
std::unique_ptr<PassGraphs> make_pass_graphs(const Execution& execution, const c10::Device& device);

}  // namespace pipetrain::device
