#pragma once
// What a layer costs when nothing describes it (a TorchScript file): the floating-point
// operations of the convolutions and matrix products it calls, counted from their shapes while
// it runs. Deterministic, unlike a time, so every worker partitions the model the same way.
#include <functional>

namespace pipetrain {

// The FLOPs (2 per multiply-add) of aten::convolution, mm, addmm, bmm and baddbmm that `run`
// calls on this thread; other operators count 0.
double counted_flops(const std::function<void()>& run);

}  // namespace pipetrain
