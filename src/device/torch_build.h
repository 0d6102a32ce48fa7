#pragma once
// What this process's libtorch is and what it can reach: named by `pipetrain --version` and
// by every run's start-up line.
#include <string>

namespace pipetrain {

struct TorchBuild {
  std::string torch_version;  // "2.11.0"
  bool cuda_compiled_in = false;  // libtorch_cuda loaded (its hooks registered)
  std::string cuda_version;       // the CUDA runtime it was built with, "13.0"; "" without CUDA
  int gpus_seen = 0;              // CUDA devices this process sees (0 without a driver)
};

TorchBuild torch_build();
// "libtorch 2.11.0, CUDA 13.0 compiled in, 0 GPUs seen"
std::string describe(const TorchBuild& build);

}  // namespace pipetrain
