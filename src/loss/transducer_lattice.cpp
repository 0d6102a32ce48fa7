#include "loss/transducer_lattice.h"

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <initializer_list>

#include "core/error.h"
#include "loss/transducer_lattice_cell.h"
#include "loss/transducer_lattice_cuda.h"

namespace pipetrain::loss {
namespace {

void host_lattice(const double* blank, const double* emit, double* alpha, double* beta, int64_t T,
                  int64_t U1) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t u = 0; u < U1; ++u) alpha[t * U1 + u] = lattice::alpha_at(blank, emit, alpha, t, u, U1);
  }
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t u = U1 - 1; u >= 0; --u) {
      beta[t * U1 + u] = lattice::beta_at(blank, emit, beta, t, u, T, U1);
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
