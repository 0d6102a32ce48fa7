#pragma once
// The softmax cross-entropy kernels' launchers (softmax_cross_entropy.cu, compiled by nvcc without
// libtorch's headers). Logits are rows of `columns` values, `row_stride` apart (a view that cuts
// a padded vocabulary needs no copy), of which the first `classes` count: the rest are padding,
// whose gradient is zero; the accumulator is double for float64 logits, float otherwise;
// everything is queued on `stream` (a cudaStream_t), nothing waits for the device.
#include <cstdint>

namespace pipetrain::loss {

enum class LogitType : int { Float32, Float64, BFloat16, Float16 };

struct LogitRows {
  const void* data = nullptr;
  int64_t rows = 0, columns = 0, classes = 0, row_stride = 0;
  LogitType type = LogitType::Float32;
};

// Per row, over j in [0, classes): top = max_j x_j, log_sum = log sum_j exp(x_j - top) and
// target_logit = x_target (NaN for a target outside [0, classes)), each [rows] of the accumulator type.
void launch_softmax_row_statistics(const LogitRows& logits, const int64_t* targets, void* top,
                                   void* log_sum, void* target_logit, void* stream);

// grad [rows, columns], contiguous, in the logits' type:
// (exp(x - top - log_sum) - onehot(target)) * scale in the first `classes` columns, 0 in the
// rest, `scale` one accumulator-typed value on the
// device (the upstream gradient over the row count).
void launch_softmax_cross_entropy_gradient(const LogitRows& logits, const int64_t* targets,
                                           const void* top, const void* log_sum, const void* scale,
                                           void* grad, void* stream);

}  // namespace pipetrain::loss
