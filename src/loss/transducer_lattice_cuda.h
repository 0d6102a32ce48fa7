#pragma once
// The lattice kernel's launcher (transducer_lattice.cu, compiled by nvcc without libtorch's
// headers): [T, U1] row-major doubles on the device, queued on `stream` (a cudaStream_t).
#include <cstdint>

namespace pipetrain::loss {

void launch_transducer_lattice(const double* blank_lp, const double* emit_lp, double* alpha,
                               double* beta, int64_t T, int64_t U1, void* stream);

}  // namespace pipetrain::loss
