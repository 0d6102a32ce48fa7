// Two thread blocks per utterance, one for alpha and one for beta: the two recursions read only
// the log-probabilities, not each other, so they run at once on two multiprocessors. In each,
// threads share the cells of an anti-diagonal t + u = d, which depend only on diagonal d - 1
// (alpha) or d + 1 (beta); a barrier between diagonals.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "loss/transducer_lattice_cell.h"
#include "loss/transducer_lattice_cuda.h"

namespace pipetrain::loss {
namespace {

__global__ void lattice_kernel(const double* blank, const double* emit, double* alpha,
                               double* beta, int64_t T, int64_t U1) {
  if (blockIdx.x == 0) {
    for (int64_t d = 0; d < T + U1 - 1; ++d) {  // alpha: from (0, 0) forwards
      for (int64_t u = threadIdx.x; u < U1; u += blockDim.x) {
        const int64_t t = d - u;
        if (t >= 0 && t < T) alpha[t * U1 + u] = lattice::alpha_at(blank, emit, alpha, t, u, U1);
      }
      __syncthreads();
    }
    return;
  }
  for (int64_t d = T + U1 - 2; d >= 0; --d) {  // beta: from (T-1, U) backwards
    for (int64_t u = threadIdx.x; u < U1; u += blockDim.x) {
      const int64_t t = d - u;
      if (t >= 0 && t < T) beta[t * U1 + u] = lattice::beta_at(blank, emit, beta, t, u, T, U1);
    }
    __syncthreads();
  }
}

}  // namespace

void launch_transducer_lattice(const double* blank_lp, const double* emit_lp, double* alpha,
                               double* beta, int64_t T, int64_t U1, void* stream) {
  const int threads = U1 >= 512 ? 512 : static_cast<int>((U1 + 31) / 32 * 32);
  lattice_kernel<<<2, threads, 0, static_cast<cudaStream_t>(stream)>>>(blank_lp, emit_lp, alpha,
                                                                       beta, T, U1);
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("transducer lattice kernel: ") + cudaGetErrorString(error));
  }
}

}  // namespace pipetrain::loss
