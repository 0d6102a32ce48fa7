#include "core/machine.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace pipetrain {

BlasInfo loaded_blas() {
  BlasInfo info;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (path.find("openblas") != std::string::npos) {
      info.path = path;
      info.openblas = true;
      return info;
    }
    if (path.find("libblas") != std::string::npos) info.path = path;
  }
  return info;
}

std::string describe_blas(const BlasInfo& blas) {
  if (blas.openblas) return "OpenBLAS (" + blas.path + ")";
  return "WARNING not OpenBLAS, expect ~16x slower GEMMs (" + (blas.path.empty() ? "none found" : blas.path) + ")";
}

int cpu_cores() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

double machine_memory_bytes() {
  double bytes = double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE));
  for (const char* limit : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(limit);
    double value = 0;
    if (in >> value && value > 0) bytes = std::min(bytes, value);  // "max" reads as no number
  }
  return bytes;
}

void keep_freed_memory_in_process() {
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, -1);  // -1: never give the heap's top back to the system
}

void return_freed_memory_to_system() {
  mallopt(M_MMAP_MAX, 1 << 20);
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
}

}  // namespace pipetrain
