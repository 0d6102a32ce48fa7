// One thread block per row of logits. Forward: each thread keeps a running (max, sum of
// exp(x - max)) over its strided columns, then the block merges them (warp shuffles, then one
// warp over the warps' results): one read of the logits, nothing written but three values a row.
// Backward: one read of the logits, one write of their gradient.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include <stdexcept>
#include <string>

#include "loss/softmax_cross_entropy_cuda.h"

namespace pipetrain::loss {
namespace {

constexpr int kThreads = 256;  // a multiple of 32; 8 warps share the row

__device__ inline float widen(float x) { return x; }
__device__ inline double widen(double x) { return x; }
__device__ inline float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ inline float widen(__half x) { return __half2float(x); }

__device__ inline void store(float* to, float x) { *to = x; }
__device__ inline void store(double* to, double x) { *to = x; }
// To nearest, ties to even: as ATen's casts round.
__device__ inline void store(__nv_bfloat16* to, float x) { *to = __float2bfloat16(x); }
__device__ inline void store(__half* to, float x) { *to = __float2half(x); }

__device__ inline float exp_of(float x) { return expf(x); }
__device__ inline double exp_of(double x) { return exp(x); }
__device__ inline float log_of(float x) { return logf(x); }
__device__ inline double log_of(double x) { return log(x); }

// sum = sum of exp(x - max) over the values seen; sum == 0: none seen (or all -inf).
template <typename Acc>
struct Running {
  Acc max, sum;
};

template <typename Acc>
__device__ inline Running<Acc> merge(Running<Acc> a, Running<Acc> b) {
  if (a.sum == 0) return b;
  if (b.sum == 0) return a;
  const Acc top = a.max > b.max ? a.max : b.max;
  return {top, a.sum * exp_of(a.max - top) + b.sum * exp_of(b.max - top)};
}

template <typename Acc>
__device__ inline void push(Running<Acc>& r, Acc x) {
  if (r.sum == 0) {
    r = {x, 1};
  } else if (x > r.max) {
    r.sum = r.sum * exp_of(r.max - x) + 1;
    r.max = x;
  } else {
    r.sum += exp_of(x - r.max);
  }
}

template <typename Acc>
__device__ inline Running<Acc> merge_across_warp(Running<Acc> r) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const Running<Acc> other{__shfl_xor_sync(0xffffffffu, r.max, offset),
                             __shfl_xor_sync(0xffffffffu, r.sum, offset)};
    r = merge(r, other);
  }
  return r;
}

template <typename In, typename Acc>
__global__ void row_statistics_kernel(const In* logits, int64_t classes, int64_t row_stride,
                                      const int64_t* targets, Acc* top, Acc* log_sum,
                                      Acc* target_logit) {
  const int64_t row = blockIdx.x;
  const In* x = logits + row * row_stride;
  Running<Acc> mine{-INFINITY, 0};
  for (int64_t j = threadIdx.x; j < classes; j += blockDim.x) {
    const Acc v = widen(x[j]);
    if (v == -INFINITY) continue;  // adds nothing; keeps max - max finite
    push(mine, v);
  }
  mine = merge_across_warp(mine);
  __shared__ Acc maxes[kThreads / 32], sums[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    maxes[warp] = mine.max;
    sums[warp] = mine.sum;
  }
  __syncthreads();
  if (warp != 0) return;
  Running<Acc> all{-INFINITY, 0};
  if (lane < blockDim.x / 32) all = Running<Acc>{maxes[lane], sums[lane]};
  all = merge_across_warp(all);
  if (lane != 0) return;
  top[row] = all.max;  // -inf, and log_sum -inf, for a row of -inf
  log_sum[row] = log_of(all.sum);
  const int64_t t = targets[row];
  target_logit[row] = (t >= 0 && t < classes) ? widen(x[t]) : Acc(NAN);
}

template <typename In, typename Acc>
__global__ void gradient_kernel(const In* logits, int64_t columns, int64_t classes,
                                int64_t row_stride,
                                const int64_t* targets, const Acc* top, const Acc* log_sum,
                                const Acc* scale, In* grad) {
  const int64_t row = blockIdx.x;
  const In* x = logits + row * row_stride;
  In* g = grad + row * columns;
  const Acc row_top = top[row], row_log_sum = log_sum[row], s = *scale;
  const int64_t t = targets[row];
  for (int64_t j = threadIdx.x; j < columns; j += blockDim.x) {
    if (j >= classes) {  // padding: read nothing, a zero gradient
      store(g + j, Acc(0));
      continue;
    }
    const Acc p = exp_of((widen(x[j]) - row_top) - row_log_sum);
    store(g + j, (j == t ? p - Acc(1) : p) * s);
  }
}

void check_launch(const char* what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(error));
  }
}

// Calls launch(In{}, Acc{}): the logits' element type and its accumulator.
template <typename Launch>
void with_types(LogitType type, Launch&& launch) {
  switch (type) {
    case LogitType::Float32: return launch(float{}, float{});
    case LogitType::Float64: return launch(double{}, double{});
    case LogitType::BFloat16: return launch(__nv_bfloat16{}, float{});
    case LogitType::Float16: return launch(__half{}, float{});
  }
}

}  // namespace

void launch_softmax_row_statistics(const LogitRows& logits, const int64_t* targets, void* top,
                                   void* log_sum, void* target_logit, void* stream) {
  if (logits.rows == 0) return;
  with_types(logits.type, [&](auto in, auto acc) {
    using In = decltype(in);
    using Acc = decltype(acc);
    row_statistics_kernel<In, Acc><<<logits.rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const In*>(logits.data), logits.classes, logits.row_stride, targets,
        static_cast<Acc*>(top), static_cast<Acc*>(log_sum), static_cast<Acc*>(target_logit));
  });
  check_launch("softmax cross-entropy statistics kernel");
}

void launch_softmax_cross_entropy_gradient(const LogitRows& logits, const int64_t* targets,
                                           const void* top, const void* log_sum, const void* scale,
                                           void* grad, void* stream) {
  if (logits.rows == 0) return;
  with_types(logits.type, [&](auto in, auto acc) {
    using In = decltype(in);
    using Acc = decltype(acc);
    gradient_kernel<In, Acc><<<logits.rows, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const In*>(logits.data), logits.columns, logits.classes, logits.row_stride,
        targets, static_cast<const Acc*>(top), static_cast<const Acc*>(log_sum),
        static_cast<const Acc*>(scale), static_cast<In*>(grad));
  });
  check_launch("softmax cross-entropy gradient kernel");
}

}  // namespace pipetrain::loss
