// The libtorch pipetrain runs on is the .venv torch wheel's: the version and CUDA facts it
// reports equal what that wheel's Python side says (an independent reading of the same build).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "device/torch_build.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

std::string python_says(const std::string& expression) {
  const auto result = testing::run_program(
      PIPETRAIN_PYTHON, "-W ignore -c 'import torch; print(" + expression + ")'", "", 120);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return result.output.substr(0, result.output.find('\n'));
}

TEST(TorchBuild, IsTheVenvWheelsLibtorchWithCudaCompiledIn) {
  const TorchBuild build = torch_build();
  const std::string wheel = python_says("torch.__version__");  // "2.11.0+cu130"
  EXPECT_EQ(build.torch_version, wheel.substr(0, wheel.find('+')));
  EXPECT_EQ(build.torch_version, "2.11.0");  // scripts/requirements.txt's pin
  EXPECT_TRUE(build.cuda_compiled_in);
  EXPECT_EQ(build.cuda_version, python_says("torch.version.cuda"));
  EXPECT_EQ(build.gpus_seen, std::stoi(python_says("torch.cuda.device_count()")));
}

TEST(TorchBuild, DescribeNamesVersionCudaAndDevices) {
  TorchBuild build{"2.11.0", true, "13.0", 1};
  EXPECT_EQ(describe(build), "libtorch 2.11.0, CUDA 13.0 compiled in, 1 GPU seen");
  build.gpus_seen = 0;
  EXPECT_EQ(describe(build), "libtorch 2.11.0, CUDA 13.0 compiled in, 0 GPUs seen");
  EXPECT_EQ(describe(TorchBuild{"2.11.0", false, "", 0}), "libtorch 2.11.0, CPU only");
}

TEST(TorchBuild, VersionFlagPrintsItAndExitsZero) {
  const auto result = testing::run_pipetrain("--version");
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_EQ(result.output, "pipetrain: " + describe(torch_build()) + "\n");
}

// libtorch.so exports its own copy of std::filesystem (the wheel's gcc-toolset links it in);
// ours must come from the system's libstdc++ (cmake/torch.cmake): libtorch's remove_all
// crashed at address 0 when a program whose libstdc++ came after libtorch called it.
TEST(TorchBuild, StdFilesystemIsTheSystemLibstdcxxs) {
  const auto dir = testing::fresh_dir("filesystem");
  std::filesystem::create_directories(dir / "a" / "b");
  std::ofstream(dir / "a" / "b" / "file") << "x";
  EXPECT_EQ(std::filesystem::remove_all(dir), 4u);  // dir, a, b, file
  EXPECT_FALSE(std::filesystem::exists(dir));
  Dl_info where{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(
                       static_cast<std::uintmax_t (*)(const std::filesystem::path&)>(
                           &std::filesystem::remove_all)),
                   &where),
            0);
  EXPECT_NE(std::string(where.dli_fname).find("libstdc++"), std::string::npos) << where.dli_fname;
}

}  // namespace
}  // namespace pipetrain
