#include "device/torch_build.h"

#include <ATen/detail/CUDAHooksInterface.h>
#include <torch/cuda.h>
#include <torch/headeronly/version.h>

#include <fmt/format.h>

namespace pipetrain {

TorchBuild torch_build() {
  TorchBuild build;
  build.torch_version = TORCH_VERSION;
  const auto& cuda = at::detail::getCUDAHooks();
  build.cuda_compiled_in = cuda.isBuilt();
  if (build.cuda_compiled_in) {
    const long runtime = cuda.versionCUDART();  // 13000 for 13.0
    build.cuda_version = fmt::format("{}.{}", runtime / 1000, runtime % 1000 / 10);
    build.gpus_seen = int(torch::cuda::device_count());
  }
  return build;
}

std::string describe(const TorchBuild& build) {
  if (!build.cuda_compiled_in) return fmt::format("libtorch {}, CPU only", build.torch_version);
  return fmt::format("libtorch {}, CUDA {} compiled in, {} GPU{} seen", build.torch_version,
                     build.cuda_version, build.gpus_seen, build.gpus_seen == 1 ? "" : "s");
}

}  // namespace pipetrain
