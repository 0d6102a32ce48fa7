#include "loss/transducer_lattice.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>

#include "core/error.h"
#include "loss/transducer_lattice_cuda.h"

namespace pipetrain::loss {
namespace {

constexpr double kNoPath = -std::numeric_limits<double>::infinity();  // log 0

inline double log_add(double a, double b) {
  if (a == kNoPath) return b;
  if (b == kNoPath) return a;
  const double hi = std::max(a, b);
  return hi + std::log1p(std::exp(-std::fabs(a - b)));
}

void host_lattice(const double* blank, const double* emit, double* alpha, double* beta, int64_t T,
                  int64_t U1) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t u = 0; u < U1; ++u) {
      const int64_t i = t * U1 + u;
      double a = (t == 0 && u == 0) ? 0.0 : kNoPath;
      if (t > 0) a = alpha[i - U1] + blank[i - U1];
      if (u > 0) a = log_add(a, alpha[i - 1] + emit[i - 1]);
      alpha[i] = a;
    }
  }
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t u = U1 - 1; u >= 0; --u) {
      const int64_t i = t * U1 + u;
      double b = (t == T - 1 && u == U1 - 1) ? blank[i] : kNoPath;
      if (t < T - 1) b = beta[i + U1] + blank[i];
      if (u < U1 - 1) b = log_add(b, beta[i + 1] + emit[i]);
      beta[i] = b;
    }
  }
}

}  // namespace

void transducer_lattice(const at::Tensor& blank_lp, const at::Tensor& emit_lp, at::Tensor& alpha,
                        at::Tensor& beta) {
  const std::initializer_list<const at::Tensor*> all = {&blank_lp, &emit_lp, &alpha, &beta};
  for (const at::Tensor* t : all) {
    if (t->scalar_type() != at::kDouble || !t->is_contiguous() || t->dim() != 2 ||
        t->sizes() != blank_lp.sizes() || t->device() != blank_lp.device()) {
      throw std::logic_error("transducer_lattice: four contiguous [T, U+1] doubles on one device");
    }
  }
  const int64_t T = blank_lp.size(0), U1 = blank_lp.size(1);
  const double *blank = blank_lp.const_data_ptr<double>(), *emit = emit_lp.const_data_ptr<double>();
  if (blank_lp.is_cuda()) {
    launch_transducer_lattice(blank, emit, alpha.data_ptr<double>(), beta.data_ptr<double>(), T, U1,
                              c10::cuda::getCurrentCUDAStream(blank_lp.device().index()).stream());
  } else {
    host_lattice(blank, emit, alpha.data_ptr<double>(), beta.data_ptr<double>(), T, U1);
  }
}

}  // namespace pipetrain::loss
