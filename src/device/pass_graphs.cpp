#include "device/pass_graphs.h"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
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

  bool prepare(int chunk, int slots, const std::vector<PartExample>& parts,
               const std::function<Passes()>& make_passes) override {
    if (chunk >= int(slots_.size())) slots_.resize(size_t(chunk) + 1);
    auto& chunk_slots = slots_[size_t(chunk)];
    for (int k = 0; k < slots; ++k) chunk_slots.push_back(make_slot(parts, make_passes()));
    return true;
  }

 protected:
  Slot& slot_of(int chunk, int slot) override { return slots_.at(size_t(chunk)).at(size_t(slot)); }
  void run_forward(int chunk, int slot, int part) override {
    forward_in(slot_of(chunk, slot), part);
  }
  void run_backward(int chunk, int slot, int part) override {
    Slot& s = slot_of(chunk, slot);
    backward_in(s, part);
    // The forward's graph goes, as after an eager backward (or the weight pass holds it).
    s.parts.at(size_t(part)).outputs.clear();
  }
  void run_weight(int chunk, int slot) override { weight_in(slot_of(chunk, slot)); }

 private:
  std::vector<std::vector<Slot>> slots_;  // per chunk, per slot
};

// Each slot's passes captured into a memory pool of its own, in the order they replay (its
// parts' forwards in order, their backwards in reverse, each followed by a split backward's
// weight pass; then the next microbatch's forwards), so a pass's temporaries may reuse what the
// one before freed and no other slot's replay touches either. Independent passes (recomputing,
// whole) keep nothing in their pool from one pass to the next: their outputs are copied out at
// once and the backward reads only the slot's inputs and gradients, made outside any pool. They
// share one pool, so the worker reserves one pass's working memory, not one per slot: what
// recomputation is for. Captured with placeholder values after the run's first steps ran eagerly
// on the same stream (cuBLAS workspaces and autograd's stream state are made outside a capture).
class CapturedPasses : public PassGraphs {
 public:
  explicit CapturedPasses(const c10::Device& device)
      : device_(device), stream_(idle_capture_stream(device)), guard_(stream_) {}

  int eager_steps() const override { return 3; }

  bool prepare(int chunk, int slots, const std::vector<PartExample>& parts,
               const std::function<Passes()>& make_passes) override {
    c10::cuda::device_synchronize();
    if (chunk >= int(captured_.size())) captured_.resize(size_t(chunk) + 1);
    for (int k = 0; k < slots; ++k) {
      captured_[size_t(chunk)].push_back(std::make_unique<Captured>());
      Captured& c = *captured_[size_t(chunk)].back();
      c.slot = make_slot(parts, make_passes());
      c.pool = pool_for(c.slot.passes);
      try {
        capture_slot(c);
      } catch (const std::exception& e) {
        fmt::print(stderr,
                   "pipetrain: train.cuda_graphs: a microbatch's passes could not be "
                   "captured as CUDA graphs ({}); the run goes on without graphs (same results, "
                   "every kernel launched from the host)\n",
                   first_line(e.what()));
        captured_.clear();
        shared_pool_.reset();
        pools_.clear();
        pool_bytes_ = 0;
        return false;
      }
    }
    // (Replays allocate nothing: what the pools hold now, they hold for the run.)
    const auto snapshot = c10::cuda::CUDACachingAllocator::snapshot({0, 0}, /*include_traces=*/false);
    pool_bytes_ = unallocated_pool_bytes(snapshot.segments, pools_);
    return true;
  }

  int64_t pool_bytes_beyond_tensors() const override { return pool_bytes_; }

 protected:
  Slot& slot_of(int chunk, int slot) override { return captured(chunk, slot).slot; }
  void run_forward(int chunk, int slot, int part) override {
    captured(chunk, slot).forward.at(size_t(part))->replay();
  }
  void run_backward(int chunk, int slot, int part) override {
    captured(chunk, slot).backward.at(size_t(part))->replay();
  }
  void run_weight(int chunk, int slot) override {
    const auto& weight = captured(chunk, slot).weight;
    if (!weight) throw std::logic_error("a weight pass of a slot whose backward is whole");
    weight->replay();
  }

 private:
  using Graph = std::unique_ptr<at::cuda::CUDAGraph>;
  struct Captured {  // (the slot's tensors, in the pool, go before the graphs that own it)
    std::vector<Graph> forward, backward;  // per part
    Graph weight;                          // a split backward's
    at::cuda::MempoolId_t pool{0, 0};
    Slot slot;
  };

  Captured& captured(int chunk, int slot) { return *captured_.at(size_t(chunk)).at(size_t(slot)); }

  at::cuda::MempoolId_t pool_for(const Passes& passes) {
    if (!passes.independent) return pools_.emplace_back(at::cuda::graph_pool_handle());
    if (!shared_pool_) shared_pool_ = pools_.emplace_back(at::cuda::graph_pool_handle());
    return *shared_pool_;
  }

  void capture_slot(Captured& c) {
    const int parts = int(c.slot.parts.size());
    c.forward.resize(size_t(parts));
    c.backward.resize(size_t(parts));
    for (int part = 0; part < parts; ++part)
      c.forward[size_t(part)] = capture(c.pool, [&] { forward_in(c.slot, part); });
    for (int part = parts - 1; part >= 0; --part) {
      c.backward[size_t(part)] = capture(c.pool, [&] { backward_in(c.slot, part); });
      if (c.slot.weight_pass) c.weight = capture(c.pool, [&] { weight_in(c.slot); });
    }
    for (auto& part : c.slot.parts) {
      for (auto& output : part.outputs) output = output.detach();  // the graph's nodes go
    }
  }

  // `body` captured into `pool`; a failure is undone (abandon_capture) before it goes on.
  template <typename Body>
  Graph capture(at::cuda::MempoolId_t pool, Body&& body) {
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
  std::optional<at::cuda::MempoolId_t> shared_pool_;              // the independent slots'
  std::vector<at::cuda::MempoolId_t> pools_;                      // every slot's
  int64_t pool_bytes_ = 0;
};

}  // namespace

int64_t unallocated_pool_bytes(
    const std::vector<c10::CachingDeviceAllocator::SegmentInfo>& segments,
    const std::vector<c10::MempoolId_t>& pools) {
  int64_t bytes = 0;
  for (const auto& segment : segments) {
    if (std::find(pools.begin(), pools.end(), segment.owner_private_pool_id) == pools.end()) continue;
    bytes += int64_t(segment.total_size) - int64_t(segment.allocated_size);
  }
  return bytes;
}

PassGraphs::Slot PassGraphs::make_slot(const std::vector<PartExample>& parts, Passes passes) {
  Slot slot;
  for (const auto& example : parts)
    slot.parts.push_back({fixed_copies(example.inputs), fixed_copies(example.grads), {}, {}});
  slot.passes = std::move(passes);
  return slot;
}

void PassGraphs::forward_in(Slot& slot, int part) {
  Part& p = slot.parts.at(size_t(part));
  p.outputs = slot.passes.forward(part, p.inputs);
}

// The inputs' gradients are the backward's own each time (as a fresh leaf's first backward
// makes them): a captured backward then writes them, never adds to them.
void PassGraphs::backward_in(Slot& slot, int part) {
  Part& p = slot.parts.at(size_t(part));
  for (const auto& input : p.inputs) {
    if (input.requires_grad()) input.mutable_grad().reset();
  }
  Backward backward = slot.passes.backward(part, p.inputs, p.outputs, p.grads);
  p.results = std::move(backward.input_grads);
  slot.weight_pass = std::move(backward.weight_pass);
}

// (What the weight pass holds, the forward's graph, goes with it.)
void PassGraphs::weight_in(Slot& slot) {
  if (!slot.weight_pass) throw std::logic_error("a weight pass of a slot whose backward is whole");
  const auto weight_pass = std::move(slot.weight_pass);
  slot.weight_pass = nullptr;
  weight_pass();
}

std::vector<at::Tensor> PassGraphs::forward(int chunk, int slot, int part,
                                            const std::vector<at::Tensor>& inputs) {
  Part& p = slot_of(chunk, slot).parts.at(size_t(part));
  copy_into(p.inputs, inputs);
  run_forward(chunk, slot, part);
  return copied_out(p.outputs);
}

std::vector<at::Tensor> PassGraphs::backward(int chunk, int slot, int part,
                                             const std::vector<at::Tensor>& grads) {
  Part& p = slot_of(chunk, slot).parts.at(size_t(part));
  copy_into(p.grads, grads);
  run_backward(chunk, slot, part);
  return copied_out(p.results);
}

void PassGraphs::weight(int chunk, int slot) { run_weight(chunk, slot); }

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
