#include "device/pass_graphs.h"

#include <stdexcept>
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

std::vector<at::Tensor> fixed_copies(const std::vector<at::Tensor>& examples) {
  std::vector<at::Tensor> copies;
  for (const auto& example : examples) {
    copies.push_back(example.detach().clone().requires_grad_(example.requires_grad()));
  }
  return copies;
}

void copy_into(const std::vector<at::Tensor>& fixed, const std::vector<at::Tensor>& values) {
  if (fixed.size() != values.size()) {
    throw std::logic_error(
        fmt::format("a pass slot takes {} tensors, given {}", fixed.size(), values.size()));
  }
  for (size_t i = 0; i < fixed.size(); ++i) {
    if (!fixed[i].sizes().equals(values[i].sizes())) {
      throw std::logic_error(fmt::format("a pass slot holds {}, given {}",
                                         c10::str(fixed[i].sizes()), c10::str(values[i].sizes())));
    }
    fixed[i].detach().copy_(values[i], /*non_blocking=*/true);
  }
}

// The caller's own tensors: the slot's are overwritten by its next pass.
std::vector<at::Tensor> copied_out(const std::vector<at::Tensor>& fixed) {
  std::vector<at::Tensor> copies;
  for (const auto& t : fixed) copies.push_back(t.defined() ? t.detach().clone() : t);
  return copies;
}

// The same slots and copies, the passes run eagerly: the tests' stand-in for the capture.
class EmulatedPasses : public PassGraphs {
 public:
  int eager_steps() const override { return 1; }  // a test's 3 steps then meet both

  bool prepare(int chunk, int slots, const std::vector<at::Tensor>& inputs,
               const std::vector<at::Tensor>& grads, const Passes& passes) override {
    Chunk& c = chunk_at(chunk);
    c.passes = passes;
    for (int k = 0; k < slots; ++k)
      c.slots.push_back({fixed_copies(inputs), fixed_copies(grads), {}, {}});
    return true;
  }

 protected:
  Slot& slot_of(int chunk, int slot) override { return chunk_at(chunk).slots.at(size_t(slot)); }
  void run_forward(int chunk, int slot) override {
    forward_in(slot_of(chunk, slot), chunk_at(chunk).passes);
  }
  void run_backward(int chunk, int slot) override {
    Slot& s = slot_of(chunk, slot);
    backward_in(s, chunk_at(chunk).passes);
    s.outputs.clear();  // the forward's graph goes, as after an eager backward
  }

 private:
  struct Chunk {
    Passes passes;
    std::vector<Slot> slots;
  };
  Chunk& chunk_at(int chunk) {
    if (chunk >= int(chunks_.size())) chunks_.resize(size_t(chunk) + 1);
    return chunks_.at(size_t(chunk));
  }
  std::vector<Chunk> chunks_;
};

// Each slot's forward and backward captured into a memory pool of its own, in the order they
// replay (forward, then backward, then the next forward), so the backward's temporaries may reuse
// what the forward freed and no other slot's replay touches either. Captured with placeholder
// values after the run's first steps ran eagerly on the same stream (cuBLAS workspaces and
// autograd's stream state are made outside a capture).
class CapturedPasses : public PassGraphs {
 public:
  explicit CapturedPasses(const c10::Device& device)
      : device_(device), stream_(idle_capture_stream(device)), guard_(stream_) {}

  int eager_steps() const override { return 3; }

  bool prepare(int chunk, int slots, const std::vector<at::Tensor>& inputs,
               const std::vector<at::Tensor>& grads, const Passes& passes) override {
    c10::cuda::device_synchronize();
    if (chunk >= int(captured_.size())) captured_.resize(size_t(chunk) + 1);
    for (int k = 0; k < slots; ++k) {
      captured_[size_t(chunk)].push_back(std::make_unique<Captured>());
      Captured& c = *captured_[size_t(chunk)].back();
      c.slot = {fixed_copies(inputs), fixed_copies(grads), {}, {}};
      c.pool = at::cuda::graph_pool_handle();
      try {
        c.forward = capture(c.pool, [&] { forward_in(c.slot, passes); });
        c.backward = capture(c.pool, [&] { backward_in(c.slot, passes); });
      } catch (const std::exception& e) {
        fmt::print(stderr,
                   "pipetrain: train.cuda_graphs: a microbatch's passes could not be "
                   "captured as CUDA graphs ({}); the run goes on without graphs (same results, "
                   "every kernel launched from the host)\n",
                   first_line(e.what()));
        captured_.clear();
        return false;
      }
      for (auto& output : c.slot.outputs) output = output.detach();  // the graph's nodes go
    }
    return true;
  }

 protected:
  Slot& slot_of(int chunk, int slot) override { return captured(chunk, slot).slot; }
  void run_forward(int chunk, int slot) override { captured(chunk, slot).forward->replay(); }
  void run_backward(int chunk, int slot) override { captured(chunk, slot).backward->replay(); }

 private:
  struct Captured {  // (the slot's tensors, in the pool, go before the graphs that own it)
    std::unique_ptr<at::cuda::CUDAGraph> forward, backward;
    at::cuda::MempoolId_t pool{0, 0};
    Slot slot;
  };

  Captured& captured(int chunk, int slot) { return *captured_.at(size_t(chunk)).at(size_t(slot)); }

  // `body` captured into `pool`; a failure is undone (abandon_capture) before it goes on.
  template <typename Body>
  std::unique_ptr<at::cuda::CUDAGraph> capture(at::cuda::MempoolId_t pool, Body&& body) {
    auto graph = std::make_unique<at::cuda::CUDAGraph>();
    graph->capture_begin(pool);
    try {
      body();
      graph->capture_end();
    } catch (...) {
      abandon_capture(*graph, device_, pool);
      throw;
    }
    return graph;
  }

  c10::Device device_;
  c10::cuda::CUDAStream stream_;
  c10::cuda::CUDAStreamGuard guard_;
  std::vector<std::vector<std::unique_ptr<Captured>>> captured_;  // per chunk, per slot
};

}  // namespace

void PassGraphs::forward_in(Slot& slot, const Passes& passes) {
  slot.outputs = passes.forward(slot.inputs);
}

// The inputs' gradients are the backward's own each time (as a fresh leaf's first backward
// makes them): a captured backward then writes them, never adds to them.
void PassGraphs::backward_in(Slot& slot, const Passes& passes) {
  for (const auto& input : slot.inputs) {
    if (input.requires_grad()) input.mutable_grad().reset();
  }
  slot.results = passes.backward(slot.inputs, slot.outputs, slot.grads);
}

std::vector<at::Tensor> PassGraphs::forward(int chunk, int slot,
                                            const std::vector<at::Tensor>& inputs) {
  Slot& s = slot_of(chunk, slot);
  copy_into(s.inputs, inputs);
  run_forward(chunk, slot);
  return copied_out(s.outputs);
}

std::vector<at::Tensor> PassGraphs::backward(int chunk, int slot,
                                             const std::vector<at::Tensor>& grads) {
  Slot& s = slot_of(chunk, slot);
  copy_into(s.grads, grads);
  run_backward(chunk, slot);
  return copied_out(s.results);
}

std::unique_ptr<PassGraphs> make_pass_graphs(const Execution& execution,
                                             const c10::Device& device) {
  switch (execution.graphs) {
    case Graphs::Off:
      return nullptr;
    case Graphs::Emulated:
      return std::make_unique<EmulatedPasses>();
    case Graphs::Captured:
      return std::make_unique<CapturedPasses>(device);
  }
  return nullptr;
}

}  // namespace pipetrain::device
