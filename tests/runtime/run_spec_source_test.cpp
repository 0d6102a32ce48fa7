// The run spec is made once: a scan of src/ finds the partition, slice and recomputation
// parsers called from make_run_spec alone (besides their own declaration and definition), and
// the launcher's settings travel in a file, not in PIPETRAIN_* variables.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

// The files under src/ (relative paths) with a line holding `text`.
std::set<std::string> files_mentioning(const std::string& text) {
  const fs::path src = fs::path(PIPETRAIN_SOURCE_DIR) / "src";
  std::set<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string extension = entry.path().extension().string();
    if (!entry.is_regular_file() || (extension != ".cpp" && extension != ".h")) continue;
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      if (line.find(text) == std::string::npos) continue;
      files.insert(fs::relative(entry.path(), src).generic_string());
      break;
    }
  }
  return files;
}

using Files = std::set<std::string>;

TEST(RunSpecSource, OnlyTheRunSpecBuilderComputesWhatTheConfigMeans) {
  EXPECT_EQ(files_mentioning("stage_ranges("),
            (Files{"runtime/partition.h", "runtime/partition.cpp", "runtime/run_spec.cpp"}));
  EXPECT_EQ(files_mentioning("recomputed_stages("),
            (Files{"runtime/partition.h", "runtime/partition.cpp", "runtime/run_spec.cpp"}));
  EXPECT_EQ(files_mentioning("parse_token_slices("),
            (Files{"runtime/token_slices.h", "runtime/token_slices.cpp", "runtime/run_spec.cpp"}));
  EXPECT_EQ(files_mentioning("Layout::of("), Files{"runtime/run_spec.cpp"});
  // The per-call helpers the run spec replaced are gone.
  EXPECT_EQ(files_mentioning("token_slices_of("), Files{});
  EXPECT_EQ(files_mentioning("recomputes_stage("), Files{});
  EXPECT_EQ(files_mentioning("is_pipeline_run("), Files{});
}

// Workers our launcher spawns read their settings from the launch file it names on their
// command line; only the torchrun contract and the test hooks stay environment variables.
TEST(RunSpecSource, TheLauncherPassesNoSettingsThroughTheEnvironment) {
  for (const std::string name : {"PIPETRAIN_STORE", "PIPETRAIN_RUN_DIR", "PIPETRAIN_PROGRESS",
                                 "PIPETRAIN_RESUME_FROM"}) {
    EXPECT_EQ(files_mentioning(name), Files{}) << name;
  }
  EXPECT_EQ(files_mentioning("write_launch_file("),
            (Files{"runtime/launch_file.h", "runtime/launch_file.cpp", "runtime/launcher.cpp"}));
  EXPECT_EQ(files_mentioning("read_launch_file("),
            (Files{"runtime/launch_file.h", "runtime/launch_file.cpp", "runtime/worker_run.cpp"}));
}

}  // namespace
}  // namespace pipetrain
