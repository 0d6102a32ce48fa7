// Exact resume: a run killed (SIGKILL, no warning) or stopped (SIGTERM) at some step and then
// continued with `pipetrain train --resume` ends with the same weight and optimizer bytes as
// the run that was never interrupted; a different stage count continues the same training; a
// checkpoint that cannot continue exactly is refused with the reason.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "core/files.h"
#include "../exactness.h"
#include "io/safetensors.h"
#include "pipeline_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kTiny =
    "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
    "--train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 8 "
    "--train.warmup_steps 2 --eval.every 0 --eval.batches 1 --sample.tokens 0 --log.every 1 "
    "--pipeline.timeout_s 600 --checkpoint.every 2 --checkpoint.keep 2";

std::string final_bytes(const fs::path& dir, const std::string& file) {
  return read_file((dir / "checkpoint" / file).string());
}

// The uninterrupted run of `args`, once per argument list.
const fs::path& reference_run(const std::string& args) {
  static std::map<std::string, fs::path> done;
  auto it = done.find(args);
  if (it != done.end()) return it->second;
  const auto dir = testing::fresh_dir(fmt::format("reference{}", done.size()));
  const auto run = testing::run_pipetrain(args + " --run-dir " + dir.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return done.emplace(args, dir).first->second;
}

void expect_same_final_state(const fs::path& resumed, const fs::path& reference) {
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    EXPECT_TRUE(final_bytes(resumed, file) == final_bytes(reference, file))
        << file << " differs from the uninterrupted run";
  }
}

// Kill `rank` before `step`, resume, compare; returns the interrupted run's output.
void kill_and_resume(const std::string& args, int rank, int step, const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  const auto killed = testing::run_pipetrain(args + " --run-dir " + dir.string(),
                                             fmt::format("PIPETRAIN_FAULT={}:{}", rank, step));
  ASSERT_NE(killed.exit_code, 0) << killed.output;
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const int checkpointed = step / 2 * 2;  // checkpoint.every 2: the last complete one
  if (checkpointed > 0) {
    EXPECT_NE(resumed.output.find(fmt::format("resuming at step {}", checkpointed)), std::string::npos)
        << resumed.output;
  }
  expect_same_final_state(dir, reference_run(args));
  fs::remove_all(dir);
}

TEST(Resume, SingleProcessKilledAndResumedIsBitwiseIdentical) {
  const std::string args = kTiny + " --stages 1";
  kill_and_resume(args, 0, 5, "single_kill");
}

// Random rank, random step, fixed seeds: deterministic, and not one hand-picked case.
TEST(Resume, PipelineKilledAtRandomAndResumedIsBitwiseIdentical) {
  const std::string args = kTiny + " --stages 2 --schedule 1f1b";
  for (const unsigned seed : {1u, 4u, 5u, 11u}) {  // kills (1,4) (0,7) (1,6) (1,3)
    std::mt19937 random(seed);
    const int rank = int(random() % 2), step = 1 + int(random() % 7);
    SCOPED_TRACE(fmt::format("seed {}: kill rank {} before step {}", seed, rank, step));
    kill_and_resume(args, rank, step, fmt::format("pipe_kill{}", seed));
  }
}

TEST(Resume, GpipeKilledAndResumedIsBitwiseIdentical) {
  kill_and_resume(kTiny + " --stages 2 --schedule gpipe", 1, 4, "gpipe_kill");
}

// 2BW keeps microbatches in flight across steps; a checkpoint at step k holds the masters and
// the stashed version group k reads, and the resumed run redoes iteration k's early forwards.
// Kill points (rank, step) from fixed seeds, resuming at steps 2, 4 and 6: 2 stages m=2, and
// 3 stages m=4.
TEST(Resume, TwoBWKilledAtRandomAndResumedIsBitwiseIdentical) {
  struct Case {
    int stages;
    std::string args;
    std::vector<unsigned> seeds;
  };
  const std::vector<Case> cases = {
      {2, kTiny + " --stages 2 --schedule 2bw", {1u, 4u, 11u}},  // kills (1,4) (0,7) (1,3)
      {3, kTiny + " --stages 3 --schedule 2bw --train.microbatches 4", {5u, 11u}},  // (2,6) (0,3)
  };
  for (const auto& c : cases) {
    for (const unsigned seed : c.seeds) {
      std::mt19937 random(seed);
      const int rank = int(random() % unsigned(c.stages)), step = 1 + int(random() % 7);
      SCOPED_TRACE(fmt::format("{} stages, seed {}: kill rank {} before step {}", c.stages, seed,
                               rank, step));
      kill_and_resume(c.args, rank, step, fmt::format("twobw{}_kill{}", c.stages, seed));
    }
  }
}

// 2bw-predict checkpoints both predicted versions (k-1 and k) besides the masters.
TEST(Resume, TwoBWPredictKilledAndResumedIsBitwiseIdentical) {
  kill_and_resume(kTiny + " --stages 2 --schedule 2bw-predict", 0, 5, "twobw_predict_kill");
}

// A pipeline run stopped by SIGTERM (fault hook on `rank` at step 3): exit 143 with a checkpoint
// and the command to continue; --resume then ends on the uninterrupted run's bytes.
void sigterm_then_resume(const std::string& args, int rank, const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(),
                                              fmt::format("PIPETRAIN_FAULT={}:3:term", rank));
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
  EXPECT_NE(stopped.output.find("stopped on request; checkpoint " + dir.string() + "/checkpoints/step-"),
            std::string::npos) << stopped.output;
  EXPECT_NE(stopped.output.find("pipetrain train --resume " + dir.string()), std::string::npos);
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_final_state(dir, reference_run(args));
  fs::remove_all(dir);
}

TEST(Resume, TwoBWSigtermStopsWithACheckpointAndResumesExactly) {
  sigterm_then_resume(kTiny + " --stages 2 --schedule 2bw --checkpoint.every 0", 1, "twobw_sigterm");
}

// The final checkpoint of a 2BW run keeps the version the next group would read: with a
// learning rate that does not depend on train.steps (min_lr = lr), 4 steps then --resume to 8
// equal 8 steps.
TEST(Resume, TwoBWFinalCheckpointContinuesToMoreSteps) {
  const std::string args = kTiny + " --stages 2 --schedule 2bw --train.min_lr 0.001 --train.lr 0.001";
  const auto dir = testing::fresh_dir("twobw_extend");
  const auto first = testing::run_pipetrain(args + " --train.steps 4 --run-dir " + dir.string());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming at step 4"), std::string::npos) << resumed.output;
  expect_same_final_state(dir, reference_run(args));
  fs::remove_all(dir);
}

// Policies that update after every microbatch write only the final checkpoint; --resume and
// SIGTERM say why in one line.
TEST(Resume, PerMicrobatchPoliciesAreRefusedWithTheReason) {
  const std::string reason = "updates after every microbatch, and the microbatches in flight at a "
                             "step boundary read weights that no checkpoint holds";
  const std::string args = kTiny + " --stages 2 --schedule pipedream --checkpoint.every 0";
  const auto dir = testing::fresh_dir("pipedream_refused");
  const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=0:2:term");
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
  EXPECT_NE(stopped.output.find("no checkpoint: schedule 'pipedream' " + reason), std::string::npos)
      << stopped.output;
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  EXPECT_NE(resumed.output.find("--resume cannot continue exactly: schedule 'pipedream' " + reason),
            std::string::npos) << resumed.output;
  fs::remove_all(dir);
}

// SIGTERM to the launcher: it forwards the signal, every worker finishes its step, writes a
// checkpoint and exits 143; --resume continues to the same bytes.
TEST(Resume, SigtermStopsWithACheckpointAndResumesExactly) {
  sigterm_then_resume(kTiny + " --stages 2 --checkpoint.every 0", 0, "sigterm");
}

TEST(Resume, SingleProcessSigtermStopsWithACheckpoint) {
  const std::string args = kTiny + " --stages 1 --checkpoint.every 0";
  const auto dir = testing::fresh_dir("sigterm1");
  const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=0:3:term");
  EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
  EXPECT_NE(stopped.output.find("stopped by SIGTERM after step 4; checkpoint " + dir.string() +
                                "/checkpoints/step-000004"), std::string::npos) << stopped.output;
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_final_state(dir, reference_run(args));
  fs::remove_all(dir);
}

// The final weights of a float64 run.
std::map<std::string, std::vector<double>> weights(const fs::path& dir) {
  const auto path = (dir / "checkpoint" / "model.safetensors").string();
  std::map<std::string, std::vector<double>> out;
  for (const auto& e : decode_safetensors(read_file(path), path)) {
    EXPECT_EQ(e.dtype, "F64") << path << " " << e.name;
    std::vector<double> values(e.bytes.size() / sizeof(double));
    std::memcpy(values.data(), e.bytes.data(), values.size() * sizeof(double));
    out[e.name] = values;
  }
  return out;
}

// Synchronous training does not depend on the partition: a 2-stage checkpoint continues on
// 3 stages or in one process as the same training, equal up to summation order: float64 to
// 1e-9 relative (tests/exactness.h). The resumed run stays float64 (its config.toml's dtype).
TEST(Resume, ContinuesOnADifferentStageCount) {
  const std::string args = kTiny + " --stages 2 --model.dtype float64";
  const auto reference = weights(reference_run(args));
  for (const std::string stages : {"3", "1"}) {
    const auto dir = testing::fresh_dir("recut" + stages);
    testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=1:5");
    const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string() + " --stages " + stages);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming at step 4"), std::string::npos) << resumed.output;
    const auto got = weights(dir);
    ASSERT_EQ(got.size(), reference.size());
    for (const auto& [name, values] : reference) {
      ASSERT_EQ(got.at(name).size(), values.size()) << name;
      for (size_t i = 0; i < values.size(); ++i) {
        ASSERT_TRUE(testing::exactly_close(got.at(name)[i], values[i]))
            << name << "[" << i << "]: " << got.at(name)[i] << " vs " << values[i];
      }
    }
    fs::remove_all(dir);
  }
}

TEST(Resume, RefusesWhatCannotContinueExactly) {
  const std::string args = kTiny + " --stages 1 --train.steps 2";
  const auto dir = testing::fresh_dir("refuse");
  ASSERT_EQ(testing::run_pipetrain(args + " --run-dir " + dir.string()).exit_code, 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --model.d_model 64", "checkpoint of a different model (2 layers, d_model 32"},
      {" --train.optimizer sgd", "checkpoint has adamw optimizer state; train.optimizer is sgd: cannot continue exactly"},
      {" --model.dtype float64", "checkpoint of a float32 run; model.dtype is float64: a checkpoint "
                                 "continues in its own dtype (set model.dtype = \"float32\")"},
      {"", "checkpoint is at step 2, the run has train.steps = 2: nothing to resume"},
      {" --run-dir /tmp/x", "--resume DIR continues DIR: leave out --run-dir"},
  };
  for (const auto& [extra, message] : cases) {
    const auto run = testing::run_pipetrain(args + " --resume " + dir.string() + extra);
    EXPECT_EQ(run.exit_code, 2) << extra << "\n" << run.output;
    EXPECT_NE(run.output.find(message), std::string::npos) << extra << "\n" << run.output;
  }
  const auto missing = testing::run_pipetrain("train --resume " + dir.string() + "-missing");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("does not exist"), std::string::npos) << missing.output;
  fs::remove_all(dir);
}

// A loss that turns non-finite stops the run naming the step, the stage and the last good
// checkpoint; no checkpoint of the broken weights is written.
TEST(Resume, NonFiniteLossStopsNamingStepStageAndCheckpoint) {
  for (const std::string stages : {"1", "2"}) {
    const auto dir = testing::fresh_dir("nan" + stages);
    const auto run = testing::run_pipetrain(kTiny + " --stages " + stages +
                                            " --train.lr 1e30 --train.warmup_steps 0 "
                                            "--checkpoint.every 1 --run-dir " + dir.string());
    EXPECT_NE(run.exit_code, 0) << run.output;
    const auto at = run.output.find("loss became ");
    ASSERT_NE(at, std::string::npos) << run.output;
    const std::string stage = stages == "1" ? "stage 0" : "stage 1, the last";
    EXPECT_NE(run.output.find("(computed on " + stage, at), std::string::npos) << run.output;
    const auto latest = read_file((dir / "checkpoints" / "latest").string());
    const int step = std::stoi(latest.substr(5));
    EXPECT_NE(run.output.find(fmt::format("at step {} ", step + 1), at), std::string::npos) << run.output;
    EXPECT_NE(run.output.find("last good checkpoint: " + (dir / "checkpoints").string() + "/step-", at),
              std::string::npos) << run.output;
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace pipetrain
