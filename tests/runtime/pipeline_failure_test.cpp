// A worker that dies mid-run: the launcher names the rank and why, every worker is gone, and
// the run ends long before the configured timeout.
#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "pipeline_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kTinyRun =
    "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
    "--train.batch_size 4 --train.threads 1 --train.steps 200 --eval.every 0 --eval.batches 1 "
    "--sample.tokens 0 --pipeline.timeout_s 30 --stages 3 --microbatches 2";

TEST(PipelineFailure, KilledWorkerStopsTheRunAndIsNamed) {
  const auto dir = testing::fresh_dir("killed");
  const auto run = testing::run_pipetrain(kTinyRun + " --run-dir " + dir.string(),
                                          "PIPETRAIN_FAULT=1:3");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("pipeline worker rank 1 (stage 1) was killed by signal 9"),
            std::string::npos) << run.output;
  EXPECT_LT(run.seconds, 30.0) << "the others must not wait for the timeout";
  std::ifstream pids(dir / "workers.pid");
  int count = 0;
  for (pid_t pid; pids >> pid; ++count) {
    EXPECT_TRUE(kill(pid, 0) == -1 && errno == ESRCH) << "worker " << pid << " left behind";
  }
  EXPECT_EQ(count, 3);
  fs::remove_all(dir);
}

TEST(PipelineFailure, BadPipelineConfigIsOneLineBeforeAnyWorkerStarts) {
  const auto run = testing::run_pipetrain("train --stages 2 --partition 1,1 --model.layers 2");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(run.output.rfind("pipetrain: error: pipeline.partition '1,1' must give 2 counts", 0),
            0u) << run.output;
}

}  // namespace
}  // namespace pipetrain
