// A worker that dies mid-run: the launcher names the rank and why, every worker is gone, and
// the run ends without waiting for the configured timeout. No clock is read: the comm timeout
// (600 s) is longer than the `timeout 300` guard of run_pipetrain, so a survivor that waited
// for it would end with the guard's exit code 124, not the launcher's 2.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/files.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kTinyRun =
    "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
    "--train.batch_size 4 --train.threads 1 --train.steps 200 --eval.every 0 --eval.batches 1 "
    "--sample.tokens 0 --pipeline.timeout_s 600 --stages 3 --microbatches 2";

int error_lines(const std::string& output) {
  int count = 0;
  for (size_t at = output.find("pipetrain: error:"); at != std::string::npos;
       at = output.find("pipetrain: error:", at + 1)) {
    ++count;
  }
  return count;
}

TEST(PipelineFailure, KilledWorkerStopsTheRunAndIsNamed) {
  const auto dir = testing::fresh_dir("killed");
  const auto run = testing::run_pipetrain(kTinyRun + " --run-dir " + dir.string(),
                                          "PIPETRAIN_FAULT=1:3");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("pipeline worker rank 1 (replica 0, worker 1) was killed by signal 9"),
            std::string::npos) << run.output;
  // One error line: the peers' follow-on errors ("receive with rank 1 failed") are not shown.
  EXPECT_EQ(error_lines(run.output), 1) << run.output;
  std::ifstream pids(dir / "workers.pid");
  int count = 0;
  for (pid_t pid; pids >> pid; ++count) {
    EXPECT_TRUE(kill(pid, 0) == -1 && errno == ESRCH) << "worker " << pid << " left behind";
  }
  EXPECT_EQ(count, 3);
  fs::remove_all(dir);
}

// A worker that stops responding without exiting (SIGSTOP): its peers give up after
// pipeline.timeout_s, name it, and the launcher stops everyone, the hung worker included. (15 s:
// the timeout bounds the rendezvous too, which workers loading libtorch beside other tests on 2
// busy cores must not miss.)
TEST(PipelineFailure, HungWorkerIsNamedAfterTheTimeout) {
  const auto dir = testing::fresh_dir("hung");
  std::string args = kTinyRun + " --run-dir " + dir.string();
  args.replace(args.find("--pipeline.timeout_s 600"), 24, "--pipeline.timeout_s 15");
  const auto run = testing::run_pipetrain(args, "PIPETRAIN_FAULT=1:3:hang");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  // The launcher's own SIGKILL is not the cause: the worker stopped responding.
  EXPECT_NE(run.output.find("pipetrain: error: pipeline worker rank 1 (replica 0, worker 1) did "
                            "not respond within pipeline.timeout_s (15 s)"),
            std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("signal 9"), std::string::npos) << run.output;
  EXPECT_EQ(error_lines(run.output), 1) << run.output;
  std::ifstream pids(dir / "workers.pid");
  for (pid_t pid; pids >> pid;) {
    EXPECT_TRUE(kill(pid, 0) == -1 && errno == ESRCH) << "worker " << pid << " left behind";
  }
  fs::remove_all(dir);
}

// Under the torchrun contract (no pipetrain launcher) a survivor stops on its own, naming the
// peer it lost.
TEST(PipelineFailure, TorchrunWorkerNamesTheDeadPeer) {
  const auto dir = testing::fresh_dir("torchrun");
  const std::string env = fmt::format(
      "PIPETRAIN_FAULT=1:3 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={}", testing::free_port());
  const std::string args = "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 "
      "--model.seq_len 16 --train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 200 "
      "--eval.every 0 --sample.tokens 0 --pipeline.timeout_s 600 --stages 2 --run-dir " +
      dir.string();
  const std::string binary = std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain";
  // Rank 1 runs in the background and kills itself at step 3; rank 0 is the one we watch.
  const auto run = testing::run_pipetrain(
      args, "(" + env + " RANK=1 timeout 120 " + binary + " " + args + " >/dev/null 2>&1 &); " +
                env + " RANK=0");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("with rank 1 failed"), std::string::npos) << run.output;
  fs::remove_all(dir);
}

// Under torchrun the worker holding the last stage (rank 1 of 2) prepares the run folder as our
// launcher would: a folder that holds a run is refused without --overwrite and left as it was
// (it used to be written into); with --overwrite the run trains and leaves config.toml, which
// `--resume` reads.
TEST(PipelineFailure, TorchrunRunRefusesAFolderHoldingARun) {
  const auto dir = testing::fresh_dir("torchrun_folder");
  const auto run_dir = dir / "run";
  fs::create_directories(run_dir);
  std::ofstream(run_dir / "metrics.jsonl") << "{\"step\": 1}\n";
  const std::string binary = std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain";
  // Rank 0's limit: in the refused run it waits for a rank 1 that has left, so it is ended
  // (TERM, then KILL 5 s later) rather than left behind for pipeline.timeout_s.
  const auto torchrun = [&](const std::string& extra, int rank0_limit_s) {
    const std::string env = fmt::format("WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={}", testing::free_port());
    const std::string args = "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
        "--train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 2 --eval.every 0 "
        "--eval.batches 1 --sample.tokens 0 --pipeline.timeout_s 600 --stages 2 --run-dir " + run_dir.string() + extra;
    // Rank 0 in the background; rank 1, which writes the run folder, is the one we watch.
    return testing::run_pipetrain(args, "(" + env + fmt::format(" RANK=0 timeout -k 5 {} ", rank0_limit_s) +
                                            binary + " " + args + " >/dev/null 2>&1 &); " + env + " RANK=1");
  };
  const auto refused = torchrun("", 30);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("already holds a run; choose another --run-dir or pass --overwrite"),
            std::string::npos) << refused.output;
  EXPECT_EQ(read_file((run_dir / "metrics.jsonl").string()), "{\"step\": 1}\n");
  EXPECT_FALSE(fs::exists(run_dir / "config.toml"));
  const auto trained = torchrun(" --overwrite", 120);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(read_file((run_dir / "config.toml").string()).find("steps = 2"), std::string::npos);
  fs::remove_all(dir);
}

// A worker whose peer never joins (it failed first, under torchrun or on another node, where no
// launcher of ours ends the rest) still hears a stop: the wait for the others then lasts a
// quarter of pipeline.timeout_s at most (30 s), and ends in one line naming the stop and who had
// joined. (It used to wait out the whole timeout, deaf to Ctrl-C.) Rank 0 alone of 2, stopped
// with SIGINT as it starts; timeout 8 s: 2 s of grace.
TEST(PipelineFailure, AStopEndsTheWaitForAWorkerThatNeverJoins) {
  const auto dir = testing::fresh_dir("never_joins");
  const std::string env = fmt::format("WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={} RANK=0 "
                                      "PIPETRAIN_FAULT=0:-1:int", testing::free_port());
  const auto run = testing::run_pipetrain(
      "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
      "--train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 2 --eval.every 0 "
      "--sample.tokens 0 --pipeline.timeout_s 8 --stages 2 --run-dir " + (dir / "run").string(), env);
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("rank 0: stopped by SIGINT while 1 of 2 workers had joined the run; they "
                            "did not join within 2 s of it, so nothing was trained"),
            std::string::npos) << run.output;
  fs::remove_all(dir);
}

TEST(PipelineFailure, BadPipelineConfigIsOneLineBeforeAnyWorkerStarts) {
  const auto run = testing::run_pipetrain("train --stages 2 --partition 1,1 --model.layers 2");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(run.output.rfind("pipetrain: error: pipeline.partition '1,1' must give 2 counts", 0),
            0u) << run.output;
}

// Unsupported data-parallel and interleaved combinations: one line, exit 2, no worker started.
TEST(PipelineFailure, UnsupportedReplicaOrChunkCombinationsAreOneLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train --stages 2 --dp-width 3 --microbatches 2 --train.batch_size 8",
       "train.batch_size (8) must be a multiple of pipeline.dp_width x train.microbatches (6)"},
      {"train --stages 2 --chunks 2 --schedule 1f1b",
       "pipeline.chunks = 2 needs pipeline.schedule = \"interleaved\""},
      {"train --stages 1 --pipeline.chunks 2 --schedule interleaved",
       "pipeline.chunks > 1 needs pipeline.stages >= 2"},
      {"train --stages 2 --pipeline.chunks 2 --schedule interleaved --microbatches 3 "
       "--train.batch_size 6",
       "schedule interleaved: microbatches (3) must be a multiple of stages (2)"},
  };
  for (const auto& [args, message] : cases) {
    // Were the check missing, one short run in a scratch folder, not the default job.
    const auto dir = testing::fresh_dir("unsupported");
    const auto run = testing::run_pipetrain(args + " --train.steps 1 --run-dir " + dir.string());
    fs::remove_all(dir);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_EQ(run.output.rfind("pipetrain: error: " + message, 0), 0u) << args << "\n" << run.output;
  }
}

// A stop after the last step, while a huge sample is drawn (sample.tokens 1e9), ends the run at
// once with its summary: sampling used to ignore SIGINT and SIGTERM. One process (SIGINT to
// itself) and a pipeline (SIGTERM to the launcher, forwarded to the sampling last stage).
TEST(PipelineFailure, AStopDuringTheSampleEndsTheRunWithItsSummary) {
  for (const auto& [stages, fault] : {std::pair{"1", "0:2:int"}, std::pair{"2", "0:2:term"}}) {
    const auto dir = testing::fresh_dir(std::string("stop_sample_") + stages);
    const auto run = testing::run_pipetrain(
        "train --quiet --model.layers 1 --model.d_model 16 --model.heads 1 --model.seq_len 8 "
        "--train.batch_size 4 --train.microbatches 2 --train.steps 2 --eval.every 0 "
        "--sample.tokens 1000000000 --stages " + std::string(stages) + " --run-dir " + dir.string(),
        std::string("PIPETRAIN_FAULT=") + fault, 120);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("sampling stopped by a signal after"), std::string::npos) << run.output;
    EXPECT_TRUE(fs::exists(dir / "summary.json")) << run.output;
    EXPECT_TRUE(fs::exists(dir / "checkpoint" / "checkpoint.json")) << run.output;
    fs::remove_all(dir);
  }
}

// A stop during a pipeline's long validation (eval.batches 1e8) stops it between batches, at the
// same batch on every worker, and the run stops with a checkpoint: the validation used to run to
// its end (here: far past the 120 s this test allows). 1F1B and 2BW (whose run-on sends are still in flight during it).
TEST(PipelineFailure, AStopDuringAPipelinesValidationStopsTheRun) {
  for (const char* schedule : {"1f1b", "2bw"}) {
    const auto dir = testing::fresh_dir(std::string("stop_validation_") + schedule);
    const auto run = testing::run_pipetrain(
        "train --quiet --model.layers 2 --model.d_model 16 --model.heads 1 --model.seq_len 8 "
        "--train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 6 "
        "--eval.every 2 --eval.batches 100000000 --sample.tokens 0 --stages 2 --schedule " +
            std::string(schedule) + " --run-dir " + dir.string(),
        "PIPETRAIN_FAULT=0:1:term", 120);
    EXPECT_EQ(run.exit_code, 128 + SIGTERM) << schedule << "\n" << run.output;
    // The signal lands in step 1 on rank 0 at once and on rank 1 when the launcher forwards it,
    // so the stop is at step 2 or 3 (runtime/stop_votes.h), with its checkpoint.
    std::smatch stop;
    ASSERT_TRUE(std::regex_search(run.output, stop, std::regex("stopped by SIGTERM after step ([23]);")))
        << run.output;
    EXPECT_TRUE(fs::exists(dir / "checkpoints" / fmt::format("step-{:06d}", std::stoi(stop[1])) /
                           "checkpoint.json")) << run.output;
    fs::remove_all(dir);
  }
}

// SIGINT to one worker of a 2BW pipeline (not to the launcher): every worker stops after the
// checkpoint of the step after the vote (runtime/stop_votes.h: step 3's vote is counted at the
// end of step 4), and the run reports the signal that was sent (it said SIGTERM).
TEST(PipelineFailure, SignalToOneWorkerIsReportedAsTheSignalSent) {
  const auto dir = testing::fresh_dir("sigint_2bw");
  const auto run = testing::run_pipetrain(
      "train --quiet --model.layers 2 --model.d_model 16 --model.heads 1 --model.seq_len 8 "
      "--train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 20 "
      "--eval.every 0 --eval.batches 1 --sample.tokens 0 --stages 2 --schedule 2bw --run-dir " +
          dir.string(),
      "PIPETRAIN_FAULT=0:2:int");
  EXPECT_EQ(run.exit_code, 128 + SIGINT) << run.output;
  EXPECT_NE(run.output.find("stopped by SIGINT after step 4"), std::string::npos) << run.output;
  EXPECT_EQ(run.output.find("SIGTERM"), std::string::npos) << run.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
