#pragma once
// Reductions whose best form depends on the device's kernels (one place that knows them).
#include <ATen/core/Tensor.h>

#include <vector>

namespace pipetrain::device {

// The sum of the squares of every value of `tensors` (the squared global norm of gradients), as a
// 0-dim float64 tensor on their device, without a float64 copy of any of them:
// - on a GPU, one foreach kernel, which reads each tensor in its own dtype and accumulates in
//   float32 by a tree, then writes float64 norms;
// - on the CPU, whose foreach and norm kernels go to float64 through a copy of the whole tensor
//   (and whose float32 norm of one long tensor accumulates in a float: 0.4% off at 38.6M values),
//   float32 norms of rows of `kSquaredSumRow` values, their squares summed in float64.
// Float64 tensors are read as they are, on every device.
at::Tensor squared_sum(const std::vector<at::Tensor>& tensors);

// Values per row of the CPU's float32 partial norms: each row's rounding error is that of a
// float32 sum of this many squares.
constexpr int64_t kSquaredSumRow = 4096;
// The CPU's temporaries while it reads one tensor: its rows' float32 norms and their float64
// squares, 12 bytes a row (the memory model's, runtime/model_costs.h).
constexpr double kSquaredSumBytesPerValue = 12.0 / double(kSquaredSumRow);

}  // namespace pipetrain::device
