#pragma once
// What a layer costs when nothing describes it (a TorchScript file), and an oracle for the
// layers that describe themselves (Model::layer_work): the floating-point operations of the
// convolutions and matrix products it calls, counted from their shapes while it runs, and the
// bytes its memory-bound operators read and write. Deterministic, unlike a time, so every worker
// partitions the model the same way.
#include <functional>

namespace pipetrain {

struct CountedWork {
  // 2 per multiply-add, of aten::convolution, mm, addmm, bmm and baddbmm at any depth.
  double flops = 0;
  // The bytes of the tensors that each memory-bound operator called by the host (not by another
  // operator) takes and returns: element-wise operators, casts, norms, reductions, copies and
  // gathers. Not counted: the products and attention (their time is their FLOPs'), views (no
  // bytes move), an embedding's whole table (a gather reads the rows it returns).
  double traffic_bytes = 0;
  // The operators the host calls that do work (not views, not allocations): a GPU launches one
  // kernel or more for each, and each costs its fixed time however little it does.
  double operators = 0;
};

// The work of what `run` calls on this thread (a CPU's autograd runs a backward on the calling
// thread, so a backward inside `run` counts).
CountedWork counted_work(const std::function<void()>& run);

}  // namespace pipetrain
