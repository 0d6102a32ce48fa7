// The launch file: what our launcher tells its workers besides their arguments.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "runtime/launch_file.h"

namespace fs = std::filesystem;

namespace pipetrain::runtime {
namespace {

fs::path scratch_dir(const std::string& name) {
  const auto dir = fs::temp_directory_path() / (name + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(LaunchFile, SettingsSurviveTheRoundTripInTheNodesOwnFile) {
  const auto dir = scratch_dir("pipetrain_launch_file");
  const std::string path = launch_file_path(dir.string(), 3);
  EXPECT_EQ(path, (dir / "launch-node3.json").string());  // nodes may share the run folder
  LaunchSettings written;
  written.run_dir = "runs/a b";
  written.store_file = "/tmp/pipetrain-rendezvous-x/store";
  written.progress = false;
  written.resume_from = "runs/a b/checkpoints/step-000004";
  written.data_fingerprint = "1115394 bytes, crc32c 0a1b2c3d";
  written.worker_cores = {"0-3", "4-7"};
  write_launch_file(path, written);
  const LaunchSettings read = read_launch_file(path);
  EXPECT_EQ(read.run_dir, written.run_dir);
  EXPECT_EQ(read.store_file, written.store_file);
  EXPECT_EQ(read.progress, false);
  EXPECT_EQ(read.resume_from, written.resume_from);
  EXPECT_EQ(read.data_fingerprint, written.data_fingerprint);
  EXPECT_EQ(read.worker_cores, written.worker_cores);
  fs::remove_all(dir);
}

TEST(LaunchFile, AnythingElseIsOneLineNamingTheFile) {
  const auto dir = scratch_dir("pipetrain_launch_file_bad");
  const std::string path = (dir / "launch-node0.json").string();
  const auto refusal = [&] {
    try {
      read_launch_file(path);
    } catch (const UserError& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_NE(refusal().find(path), std::string::npos);  // missing
  write_file_atomically(path, R"({"run_dir": 5, "store_file": "", "progress": true, "resume_from": ""})");
  EXPECT_EQ(refusal().rfind(path + ": not a launch file of pipetrain's launcher", 0), 0u) << refusal();
  write_file_atomically(path, "{");
  EXPECT_EQ(refusal().rfind(path + ": not valid JSON", 0), 0u) << refusal();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain::runtime
