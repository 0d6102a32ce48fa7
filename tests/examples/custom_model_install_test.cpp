// A user's project against an installed pipetrain: `cmake --install` into a fresh prefix,
// examples/custom_model configured and built out of tree with find_package(pipetrain), and its
// program trains its own model on 2 pipeline stages through pipetrain's launcher. Its checkpoint
// every 20 steps, keeping 1, removes a full step folder: with libtorch's std::filesystem first in
// the program's library search (a consumer's link line without pipetrain_torch's options), that
// remove_all jumps to address 0.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "../pipetrain_run.h"
#include "io/metrics.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// Under the build folder rather than /tmp: a stable path keeps ccache's hits (base_dir).
const fs::path kWork = fs::path(PIPETRAIN_BINARY_DIR) / "custom_model_install";

void expect_step_ok(const testing::ProcessResult& result, const std::string& what) {
  ASSERT_EQ(result.exit_code, 0) << what << "\n" << result.output;
}

TEST(InstalledPrefix, BuildsAndTrainsTheCustomModelExample) {
  fs::remove_all(kWork);
  const fs::path prefix = kWork / "prefix", build = kWork / "build", run_dir = kWork / "run";
  const std::string cmake = PIPETRAIN_CMAKE_COMMAND;
  expect_step_ok(testing::run_program(cmake, "--install " + std::string(PIPETRAIN_BINARY_DIR) +
                                                 " --prefix " + prefix.string(), "", 120),
                 "install");
  ASSERT_TRUE(fs::exists(prefix / "lib" / "cmake" / "pipetrain" / "pipetrainConfig.cmake"));
  ASSERT_TRUE(fs::exists(prefix / "include" / "pipetrain" / "pipetrain.h"));

  const std::string launcher = std::string(PIPETRAIN_CCACHE).empty()
                                   ? ""
                                   : " -DCMAKE_CXX_COMPILER_LAUNCHER=" + std::string(PIPETRAIN_CCACHE);
  expect_step_ok(testing::run_program(
                     cmake, "-S " + std::string(PIPETRAIN_SOURCE_DIR) + "/examples/custom_model -B " +
                                build.string() + " -G \"" + PIPETRAIN_CMAKE_GENERATOR +
                                "\" -DCMAKE_PREFIX_PATH=" + prefix.string() + launcher, "", 300),
                 "configure");
  expect_step_ok(testing::run_program(cmake, "--build " + build.string() + " -j2", "", 600), "build");

  const auto run = testing::run_program(
      (build / "my_trainer").string(),
      "train --quiet --model.kind mlp --data.format teacher --model.layers 2 --model.d_model 16 "
      "--pipeline.stages 2 --pipeline.schedule 1f1b --train.batch_size 32 --train.microbatches 4 "
      "--train.steps 40 --train.warmup_steps 0 --train.lr 1e-2 --train.threads 1 --log.every 1 "
      "--eval.every 0 --eval.batches 2 --sample.tokens 0 --checkpoint.every 20 --checkpoint.keep 1 "
      "--run-dir " + run_dir.string());
  expect_step_ok(run, "train");
  EXPECT_FALSE(fs::exists(run_dir / "checkpoints" / "step-000020"));
  EXPECT_TRUE(fs::exists(run_dir / "checkpoints" / "step-000040" / "checkpoint.json"));
  const auto records = read_metrics((run_dir / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), 40u);
  double first = 0, last = 0;  // mean loss of the first and of the last 5 steps
  for (size_t i = 0; i < records.size(); ++i) {
    const double loss = records[i]["loss"].get<double>();
    ASSERT_TRUE(std::isfinite(loss)) << "step " << i;
    if (i < 5) first += loss / 5;
    if (i >= records.size() - 5) last += loss / 5;
  }
  EXPECT_LT(last, 0.7 * first) << "the loss did not fall: " << first << " -> " << last;
  fs::remove_all(kWork);
}

}  // namespace
}  // namespace pipetrain
