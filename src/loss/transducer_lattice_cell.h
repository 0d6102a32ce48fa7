#pragma once
// One cell of the transducer lattice, for the host loop (transducer_lattice.cpp) and the GPU
// kernel (transducer_lattice.cu) alike: [T, U1] row-major doubles, i = t * U1 + u; emit's last
// column is -inf. No libtorch: nvcc compiles it too.
#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define PIPETRAIN_HOST_DEVICE __host__ __device__
#else
#define PIPETRAIN_HOST_DEVICE
#endif

namespace pipetrain::loss::lattice {

// log(e^a + e^b), exact where either is log 0.
PIPETRAIN_HOST_DEVICE inline double log_add(double a, double b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  return fmax(a, b) + log1p(exp(-fabs(a - b)));
}

// alpha at (t, u): reached from (t-1, u) by a blank or from (t, u-1) by label u-1; 0 at (0, 0).
PIPETRAIN_HOST_DEVICE inline double alpha_at(const double* blank, const double* emit,
                                             const double* alpha, int64_t t, int64_t u, int64_t U1) {
  const int64_t i = t * U1 + u;
  double a = (t == 0 && u == 0) ? 0.0 : -INFINITY;
  if (t > 0) a = alpha[i - U1] + blank[i - U1];
  if (u > 0) a = log_add(a, alpha[i - 1] + emit[i - 1]);
  return a;
}

// beta at (t, u): on to (t+1, u) by a blank or to (t, u+1) by label u; the final blank at
// (T-1, U1-1) ends every alignment.
PIPETRAIN_HOST_DEVICE inline double beta_at(const double* blank, const double* emit,
                                            const double* beta, int64_t t, int64_t u, int64_t T,
                                            int64_t U1) {
  const int64_t i = t * U1 + u;
  double b = (t == T - 1 && u == U1 - 1) ? blank[i] : -INFINITY;
  if (t < T - 1) b = beta[i + U1] + blank[i];
  if (u < U1 - 1) b = log_add(b, beta[i + 1] + emit[i]);
  return b;
}

}  // namespace pipetrain::loss::lattice
