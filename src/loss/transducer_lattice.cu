// One thread block per utterance: threads share the cells of an anti-diagonal t + u = d, which
// depend only on diagonal d - 1 (alpha) or d + 1 (beta); a barrier between diagonals.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "loss/transducer_lattice_cuda.h"

namespace pipetrain::loss {
namespace {

__device__ double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const double hi = fmax(a, b);
  return hi + log1p(exp(-fabs(a - b)));
}

__global__ void lattice_kernel(const double* blank, const double* emit, double* alpha,
                               double* beta, int64_t T, int64_t U1) {
  for (int64_t d = 0; d < T + U1 - 1; ++d) {  // alpha: from (0, 0) forwards
    for (int64_t u = threadIdx.x; u < U1; u += blockDim.x) {
      const int64_t t = d - u, i = t * U1 + u;
      if (t < 0 || t >= T) continue;
      double a = (t == 0 && u == 0) ? 0.0 : -INFINITY;
      if (t > 0) a = alpha[i - U1] + blank[i - U1];
      if (u > 0) a = log_add(a, alpha[i - 1] + emit[i - 1]);
      alpha[i] = a;
    }
    __syncthreads();
  }
  for (int64_t d = T + U1 - 2; d >= 0; --d) {  // beta: from (T-1, U) backwards
    for (int64_t u = threadIdx.x; u < U1; u += blockDim.x) {
      const int64_t t = d - u, i = t * U1 + u;
      if (t < 0 || t >= T) continue;
      double b = (t == T - 1 && u == U1 - 1) ? blank[i] : -INFINITY;
      if (t < T - 1) b = beta[i + U1] + blank[i];
      if (u < U1 - 1) b = log_add(b, beta[i + 1] + emit[i]);
      beta[i] = b;
    }
    __syncthreads();
  }
}

}  // namespace

void launch_transducer_lattice(const double* blank_lp, const double* emit_lp, double* alpha,
                               double* beta, int64_t T, int64_t U1, void* stream) {
  const int threads = U1 >= 512 ? 512 : static_cast<int>((U1 + 31) / 32 * 32);
  lattice_kernel<<<1, threads, 0, static_cast<cudaStream_t>(stream)>>>(blank_lp, emit_lp, alpha,
                                                                       beta, T, U1);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("transducer lattice kernel: ") + cudaGetErrorString(error));
  }
}

}  // namespace pipetrain::loss
