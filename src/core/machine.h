#pragma once
// Facts about the running process that affect speed, reported at start-up.
#include <string>

namespace pipetrain {

struct BlasInfo {
  std::string path;    // the BLAS shared object mapped into this process ("" if none)
  bool openblas = false;
};

// Reads /proc/self/maps: which libblas the dynamic linker actually loaded. Debian picks it via
// alternatives; the reference BLAS is ~16x slower than OpenBLAS for our GEMMs.
BlasInfo loaded_blas();

int cpu_cores();

}  // namespace pipetrain
