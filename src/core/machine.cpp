#include "core/machine.h"

#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <thread>

namespace pipetrain {

std::vector<int> allowed_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int core = 0; core < CPU_SETSIZE; ++core) {
      if (CPU_ISSET(core, &set)) cores.push_back(core);
    }
  }
  if (cores.empty()) {
    const int n = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
    for (int core = 0; core < n; ++core) cores.push_back(core);
  }
  return cores;
}

int cpu_cores() { return static_cast<int>(allowed_cores().size()); }

int64_t worker_compute_threads(int64_t configured, bool bound, int64_t workers) {
  if (configured > 0) return configured;
  if (bound) return cpu_cores();
  return std::max<int64_t>(1, cpu_cores() / std::max<int64_t>(1, workers));
}

std::vector<std::vector<int>> core_blocks(const std::vector<int>& cores, int workers) {
  if (workers < 1 || cores.size() < size_t(workers)) return {};
  std::vector<std::vector<int>> blocks;
  const size_t base = cores.size() / size_t(workers), larger = cores.size() % size_t(workers);
  auto next = cores.begin();
  for (size_t w = 0; w < size_t(workers); ++w) {
    const auto size = long(base + (w < larger ? 1 : 0));
    blocks.emplace_back(next, next + size);
    next += size;
  }
  return blocks;
}

std::string describe_cores(const std::vector<int>& cores) {
  std::string text;
  for (size_t i = 0; i < cores.size();) {
    size_t end = i;
    while (end + 1 < cores.size() && cores[end + 1] == cores[end] + 1) ++end;
    if (!text.empty()) text += ",";
    text += std::to_string(cores[i]);
    if (end > i) text += "-" + std::to_string(cores[end]);
    i = end + 1;
  }
  return text;
}

bool bind_to_cores(const std::vector<int>& cores) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const int core : cores) CPU_SET(core, &set);
  return sched_setaffinity(0, sizeof(set), &set) == 0;
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
  mallopt(M_MMAP_THRESHOLD, 256 << 10);
  mallopt(M_TRIM_THRESHOLD, 16 << 20);
}

}  // namespace pipetrain
