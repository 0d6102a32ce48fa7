// Exact resume: a run killed (SIGKILL, no warning) or stopped (SIGTERM) at some step and then
// continued with `pipetrain train --resume` ends with the same weight and optimizer bytes as
// the run that was never interrupted; a different stage count continues the same training; a
// checkpoint that cannot continue exactly is refused with the reason.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "io/checkpoint_dir.h"
#include "io/crc32c.h"
#include "io/metrics.h"
#include "../exactness.h"
#include "io/safetensors.h"
#include "../pipetrain_run.h"

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
  if (run.exit_code != 0) {  // not kept: every later comparison would be with a failed run
    ADD_FAILURE() << "the uninterrupted run failed:\n" << run.output;
    static const fs::path none;
    return none;
  }
  return done.emplace(args, dir).first->second;
}

// Every step's loss as metrics.jsonl writes it (log.every 1).
std::vector<std::string> step_losses(const fs::path& dir) {
  std::vector<std::string> losses;
  for (const auto& record : read_metrics((dir / "metrics.jsonl").string())) {
    losses.push_back(record["loss"].dump());
  }
  return losses;
}

void expect_same_final_state(const fs::path& resumed, const fs::path& reference) {
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    EXPECT_TRUE(final_bytes(resumed, file) == final_bytes(reference, file))
        << file << " differs from the uninterrupted run";
  }
  EXPECT_EQ(step_losses(resumed), step_losses(reference));
}

// Kill `rank` before `step`, resume, compare; returns the interrupted run's output.
void kill_and_resume(const std::string& args, int rank, int step, const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  const auto killed = testing::run_pipetrain(args + " --run-dir " + dir.string(),
                                             fmt::format("PIPETRAIN_FAULT={}:{}", rank, step));
  // The fault fired, not another failure: a single process killed itself (timeout's 128 + 9),
  // or the launcher names the worker killed.
  const bool fired = killed.exit_code == 128 + SIGKILL ||
                     (killed.output.find(fmt::format("pipeline worker rank {} (", rank)) != std::string::npos &&
                      killed.output.find("was killed by signal 9") != std::string::npos);
  ASSERT_TRUE(fired) << "exit " << killed.exit_code << ": " << killed.output;
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const int checkpointed = step / 2 * 2;  // checkpoint.every 2: the last complete one
  if (checkpointed > 0) {
    EXPECT_NE(resumed.output.find(fmt::format("resuming at step {}", checkpointed)), std::string::npos)
        << resumed.output;
  }
  expect_same_final_state(dir, reference_run(args));
  // The plot has the steps before the resume too (log.every 1: the same points, the same bytes).
  EXPECT_EQ(read_file((dir / "loss.svg").string()), read_file((reference_run(args) / "loss.svg").string()));
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

// A V placement: worker 0 holds the first and the last stage and writes the checkpoints.
TEST(Resume, VPlacementsKilledAndResumedAreBitwiseIdentical) {
  kill_and_resume(kTiny + " --stages 2 --pipeline.chunks 2 --schedule zb-v", 0, 5, "zb_v_kill");
  kill_and_resume(kTiny + " --stages 2 --pipeline.chunks 2 --schedule dualpipev --train.microbatches 4",
                  1, 4, "dualpipev_kill");
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

// Long enough that the workers run a short list pumped (schedule::StepLists): killed in its
// repeated steady steps, the resumed run's first step is made from the pumped steps too.
TEST(Resume, LongNoFlushRunsKilledInTheirRepeatedStepsAreBitwiseIdentical) {
  const std::string longer = " --train.steps 24";
  kill_and_resume(kTiny + longer + " --stages 2 --schedule 2bw", 1, 15, "twobw_long_kill");
  kill_and_resume(kTiny + longer + " --stages 2 --schedule pipedream", 0, 13, "pipedream_long_kill");
  kill_and_resume(kTiny + longer + " --stages 2 --schedule pipeoptim", 1, 17, "pipeoptim_long_kill");
}

// 2bw-predict checkpoints both predicted versions (k-1 and k) besides the masters.
TEST(Resume, TwoBWPredictKilledAndResumedIsBitwiseIdentical) {
  kill_and_resume(kTiny + " --stages 2 --schedule 2bw-predict", 0, 5, "twobw_predict_kill");
}

// Muon's momentum and error feedback's previous update travel in the checkpoint: killed runs
// (Muon under 1f1b; Muon with error feedback under 2BW; error feedback on one process) resume
// on the uninterrupted run's bytes.
TEST(Resume, MuonAndErrorFeedbackKilledAndResumedAreBitwiseIdentical) {
  kill_and_resume(kTiny + " --stages 2 --schedule 1f1b --train.optimizer muon", 1, 5, "muon_kill");
  kill_and_resume(kTiny + " --stages 2 --schedule 2bw --train.optimizer muon "
                          "--train.delay_correction error_feedback", 0, 5, "muon_ef_twobw_kill");
  kill_and_resume(kTiny + " --stages 1 --train.delay_correction error_feedback", 0, 3, "ef_single_kill");
}

// 2BW on one stage runs its policy on one worker (issue 16, 3d), and resumes like any 2BW run.
TEST(Resume, OneStageTwoBWKilledAndResumedIsBitwiseIdentical) {
  kill_and_resume(kTiny + " --stages 1 --schedule 2bw", 0, 5, "twobw1_kill");
}

// A synchronous warm-up (3 steps here) checkpoints like 1F1B inside it (nothing stashed: the
// continuation reads the latest weights) and like 2BW after it: killed in either part, or at the
// switch, a run resumes bitwise.
TEST(Resume, TwoBWAfterASyncWarmUpKilledAndResumedIsBitwiseIdentical) {
  const std::string args = kTiny + " --stages 2 --schedule 2bw --pipeline.sync_warmup_steps 3";
  kill_and_resume(args, 1, 3, "warm_twobw_kill_inside");  // resumes at step 2, inside
  kill_and_resume(args, 0, 5, "warm_twobw_kill_after");   // resumes at step 4, the first delayed
  kill_and_resume(args, 1, 7, "warm_twobw_kill_late");    // resumes at step 6
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

// A final checkpoint keeps what the next step's forwards would read (2BW: the version the next
// group reads; PipeDream: the stashed versions the last step's updates made, read by nothing in the run;
// PipeOptim, SpecTrain: those versions predicted right after their update, as the forwards would
// have): 4 steps then --resume to 8 equal 8 steps, at 2 and 3 stages (constant learning rate).
void expect_final_checkpoint_continues(const std::string& schedule) {
  for (const std::string shape : {" --stages 2", " --stages 3 --train.microbatches 4"}) {
    SCOPED_TRACE(schedule + shape);
    const std::string args = kTiny + shape + " --schedule " + schedule +
                             " --train.min_lr 0.001 --train.lr 0.001";
    const auto dir = testing::fresh_dir("extend_" + schedule);
    const auto first = testing::run_pipetrain(args + " --train.steps 4 --run-dir " + dir.string());
    ASSERT_EQ(first.exit_code, 0) << first.output;
    const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming at step 4"), std::string::npos) << resumed.output;
    expect_same_final_state(dir, reference_run(args));
    fs::remove_all(dir);
  }
}

TEST(Resume, TwoBWFinalCheckpointContinuesToMoreSteps) { expect_final_checkpoint_continues("2bw"); }
TEST(Resume, PipeDreamFinalCheckpointContinuesToMoreSteps) { expect_final_checkpoint_continues("pipedream"); }
TEST(Resume, PipeOptimFinalCheckpointContinuesToMoreSteps) { expect_final_checkpoint_continues("pipeoptim"); }
TEST(Resume, SpecTrainFinalCheckpointContinuesToMoreSteps) { expect_final_checkpoint_continues("spectrain"); }

// PipeDream's family updates after every microbatch: a checkpoint holds the stashed versions
// (PipeDream) or the predicted weights (PipeOptim, SpecTrain) that the forwards run ahead of
// their step read, and the resumed run redoes those forwards. The weights, the optimizer state
// and every step's loss equal the uninterrupted run's. Kill points from fixed seeds (rank, step):
// resuming at steps 2, 4 and 6.
TEST(Resume, PerMicrobatchPoliciesKilledAndResumedAreBitwiseIdentical) {
  struct Case {
    std::string args;
    int rank, step;
  };
  const std::vector<Case> cases = {
      {kTiny + " --stages 2 --schedule pipedream", 1, 5},
      {kTiny + " --stages 3 --schedule pipedream --train.microbatches 4", 0, 3},
      {kTiny + " --stages 2 --schedule pipeoptim", 0, 7},
      {kTiny + " --stages 3 --schedule pipeoptim --train.microbatches 4", 2, 5},
      {kTiny + " --stages 3 --schedule spectrain --train.microbatches 4 --train.optimizer sgd "
               "--train.momentum 0.9", 1, 4},
      {kTiny + " --stages 2 --schedule spectrain", 0, 3},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(fmt::format("{}: kill rank {} before step {}", c.args, c.rank, c.step));
    kill_and_resume(c.args, c.rank, c.step, "per_microbatch_kill");
  }
}

TEST(Resume, PipeDreamSigtermStopsWithACheckpointAndResumesExactly) {
  sigterm_then_resume(kTiny + " --stages 2 --schedule pipedream --checkpoint.every 0", 0,
                      "pipedream_sigterm");
}

// Without periodic checkpoints PipeOptim copies nothing its forwards read ahead of a step. A
// stop signal in step 4 is agreed at the end of step 5 (runtime/stop_votes.h), which ran without
// those copies, so the stop waits one more step: step 6, run keeping them. The signal goes to
// one worker (SIGINT): a SIGTERM to the launcher is forwarded to all, and reaches a worker whose
// step still lags (stage 0 ends each step last) a step earlier under load, which moves the
// stop a step earlier, rightly but not at the step this test names.
TEST(Resume, PipeOptimStopSignalStopsAStepLaterWithACheckpointAndResumesExactly) {
  const std::string args = kTiny + " --stages 3 --schedule pipeoptim --train.microbatches 4 "
                                   "--checkpoint.every 0";
  const auto dir = testing::fresh_dir("pipeoptim_sigint");
  const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=1:3:int");
  EXPECT_EQ(stopped.exit_code, 128 + SIGINT) << stopped.output;
  EXPECT_NE(stopped.output.find("stopped on request; checkpoint " + dir.string() +
                                "/checkpoints/step-000006"), std::string::npos) << stopped.output;
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming at step 6"), std::string::npos) << resumed.output;
  expect_same_final_state(dir, reference_run(args));
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

// A closed terminal (SIGHUP) stops a run as SIGTERM does, with a checkpoint to resume from (it
// used to kill it without one); under nohup (SIGHUP ignored) the run goes on to its end.
TEST(Resume, AHangupStopsWithACheckpointUnlessIgnored) {
  for (const std::string stages : {"1", "2"}) {
    SCOPED_TRACE("stages " + stages);
    const std::string args = kTiny + " --stages " + stages + " --checkpoint.every 0";
    const auto dir = testing::fresh_dir("sighup");
    const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=0:3:hup");
    EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
    EXPECT_TRUE(fs::exists(dir / "checkpoints" / "latest")) << stopped.output;
    const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    expect_same_final_state(dir, reference_run(args));
    fs::remove_all(dir);
    const auto under_nohup = testing::run_program("nohup " + std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain",
                                                  args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=0:3:hup");
    EXPECT_EQ(under_nohup.exit_code, 0) << under_nohup.output;
    expect_same_final_state(dir, reference_run(args));
    fs::remove_all(dir);
  }
}

// A stop while the workers still start (rendezvous, model; before their first step): a Ctrl-C
// to the process group reaches every worker there, a SIGTERM to the launcher is forwarded. It
// used to kill the workers (the launcher reported "worker killed by signal 2", exit 2); now the
// run stops at a step boundary with a checkpoint, exits 128 + signal, and resumes exactly.
TEST(Resume, AStopWhileTheWorkersStartStopsWithACheckpoint) {
  const std::string args = kTiny + " --stages 2 --checkpoint.every 0";
  for (const auto& [fault, signal] : std::vector<std::pair<std::string, int>>{{"1:-1:int", SIGINT},
                                                                             {"0:-1:term", SIGTERM}}) {
    SCOPED_TRACE(fault);
    const auto dir = testing::fresh_dir("startup_stop");
    const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=" + fault);
    EXPECT_EQ(stopped.exit_code, 128 + signal) << stopped.output;
    EXPECT_NE(stopped.output.find("all 2 workers stopped on request; checkpoint " + dir.string()),
              std::string::npos) << stopped.output;
    const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    expect_same_final_state(dir, reference_run(args));
    fs::remove_all(dir);
  }
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

// Every weight element of `got` equals `reference` to float64 exactness (tests/exactness.h).
void expect_exactly_close_weights(const std::map<std::string, std::vector<double>>& got,
                                  const std::map<std::string, std::vector<double>>& reference) {
  ASSERT_EQ(got.size(), reference.size());
  for (const auto& [name, values] : reference) {
    ASSERT_EQ(got.at(name).size(), values.size()) << name;
    for (size_t i = 0; i < values.size(); ++i) {
      ASSERT_TRUE(testing::exactly_close(got.at(name)[i], values[i]))
          << name << "[" << i << "]: " << got.at(name)[i] << " vs " << values[i];
    }
  }
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
    expect_exactly_close_weights(weights(dir), reference);
    fs::remove_all(dir);
  }
}

// ZeRO-1: a checkpoint holds the optimizer state gathered from the replicas' shards (the format
// of an unsharded run), and a resumed replica keeps its shard of it: killed runs resume on the
// uninterrupted run's bytes (1F1B, 2BW and PipeDream, 2 stages x 2 replicas).
TEST(Resume, ZeroOneKilledAndResumedIsBitwiseIdentical) {
  const std::string wide = kTiny + " --stages 2 --dp-width 2 --zero1";
  kill_and_resume(wide + " --schedule 1f1b", 3, 5, "zero1_kill");
  kill_and_resume(wide + " --schedule 2bw", 0, 7, "zero1_twobw_kill");
  kill_and_resume(wide + " --schedule pipedream", 1, 3, "zero1_pipedream_kill");
}

// The gathered state loads onto any width: a ZeRO-1 checkpoint of 2 replicas continues on 4
// (ZeRO-1, each keeping a quarter) or on 1 (unsharded), and an unsharded checkpoint continues
// under ZeRO-1, as the same training: the global batch is the same, only the summation order
// differs, so float64 to 1e-9 relative (tests/exactness.h).
TEST(Resume, ZeroOneContinuesOnAnotherWidth) {
  const std::string base = kTiny + " --stages 2 --train.batch_size 8 --model.dtype float64";
  const std::string sharded = base + " --dp-width 2 --zero1";
  const auto reference = weights(reference_run(sharded));
  struct Case {
    std::string args, resumed_on;
    int width;
  };
  const std::vector<Case> cases = {{sharded, " --dp-width 4", 4},
                                   {sharded, " --dp-width 1 --pipeline.zero1 0", 1},
                                   {base, " --dp-width 2 --zero1", 2}};
  for (const auto& [args, resumed_on, width] : cases) {
    SCOPED_TRACE(args + " resumed with" + resumed_on);
    const auto dir = testing::fresh_dir("zero1_width");
    testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=1:5");
    const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string() + resumed_on);
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("resuming at step 4"), std::string::npos) << resumed.output;
    const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
    EXPECT_EQ(summary["dp_width"].get<int>(), width);
    expect_exactly_close_weights(weights(dir), reference);
    fs::remove_all(dir);
  }
}

// A per-microbatch policy's update sums every replica's microbatch i: on another width it would
// be another training, so a PipeDream checkpoint of 2 replicas does not continue on 1.
TEST(Resume, PerMicrobatchPolicyIsRefusedOnAnotherWidth) {
  const std::string args = kTiny + " --stages 2 --schedule pipedream --dp-width 2 --train.steps 2 "
                                   "--checkpoint.every 1";
  const auto dir = testing::fresh_dir("pipedream_width");
  ASSERT_NE(testing::run_pipetrain(args + " --run-dir " + dir.string(), "PIPETRAIN_FAULT=0:1").exit_code, 0);
  const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string() + " --dp-width 1");
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  EXPECT_NE(resumed.output.find("checkpoint of a 'pipedream' run with pipeline.dp_width = 2; this "
                                "run has 1: its updates after every microbatch would sum other "
                                "rows of each batch (resume with --dp-width 2)"),
            std::string::npos) << resumed.output;
  const auto same = testing::run_pipetrain(args + " --resume " + dir.string());
  EXPECT_EQ(same.exit_code, 0) << same.output;
  fs::remove_all(dir);
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

// The short flag set T: 4 steps, a checkpoint every 2.
const std::string kShort =
    "train --quiet --model.layers 2 --model.d_model 16 --model.heads 1 --model.seq_len 8 "
    "--train.batch_size 4 --train.microbatches 2 --train.steps 4 --eval.batches 1 "
    "--sample.tokens 0 --train.threads 1 --checkpoint.every 2 --pipeline.timeout_s 60";

fs::path finished_short_run(const std::string& extra, const std::string& name) {
  const auto dir = testing::fresh_dir(name);
  const auto run = testing::run_pipetrain(kShort + " " + extra + " --run-dir " + dir.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  return dir;
}

fs::path latest_checkpoint_of(const fs::path& run_dir) {
  std::string name = read_file((run_dir / "checkpoints" / "latest").string());
  while (!name.empty() && name.back() == '\n') name.pop_back();
  return run_dir / "checkpoints" / name;
}

// Replaces `file` of a checkpoint as a consistent (if buggy) writer would: its checksum in
// checkpoint.json follows the new bytes, so only the content itself can be refused.
void replace_checkpoint_file(const fs::path& checkpoint, const std::string& file,
                             const std::string& bytes) {
  write_file_atomically((checkpoint / file).string(), bytes);
  const auto sidecar = (checkpoint / "checkpoint.json").string();
  CheckpointInfo info = parse_checkpoint_info(read_file(sidecar), sidecar);
  info.crc32c[file] = crc32c_hex(bytes);
  write_file_atomically(sidecar, checkpoint_info_json(info));  // with its own checksum again
}

void expect_one_line_refusal(const std::string& args, const std::vector<std::string>& fragments) {
  const auto run = testing::run_pipetrain(args);
  EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
  EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
  EXPECT_EQ(run.output.rfind("pipetrain: error: ", 0), 0u) << run.output;
  for (const auto& fragment : fragments) {
    EXPECT_NE(run.output.find(fragment), std::string::npos) << fragment << "\n" << run.output;
  }
}

// A copy of a finished run to damage (each damage on its own copy: a resume that wrongly
// succeeds must not hide the next case).
fs::path copy_of(const fs::path& run_dir, const std::string& name) {
  const auto copy = testing::fresh_dir(name);
  fs::copy(run_dir, copy, fs::copy_options::recursive);
  return copy;
}

// Optimizer state that is missing or malformed is refused in one line naming the file and the
// entry, before any worker starts, though checkpoint.json vouches for the file (issue 16, 3a:
// such state used to load as zeros).
TEST(Resume, IncompleteOptimizerStateIsRefusedNamingFileAndEntry) {
  const auto pipe = finished_short_run("--stages 2", "optstate_pipe");
  const auto pipe_checkpoint = latest_checkpoint_of(pipe);
  replace_checkpoint_file(pipe_checkpoint, "stage0.optimizer.safetensors",
                          read_file((pipe_checkpoint / "stage1.optimizer.safetensors").string()));
  for (const std::string stages : {"2", "1"}) {
    const auto copy = copy_of(pipe, "optstate_pipe_copy");
    expect_one_line_refusal("train --resume " + copy.string() + " --train.steps 6 --stages " + stages,
                            {latest_checkpoint_of(copy).string() + "/stage0.optimizer.safetensors: ",
                             "optimizer state 'layer0.", "missing"});
    fs::remove_all(copy);
  }

  const auto single = finished_short_run("--stages 1", "optstate_single");
  const std::string good = read_file((latest_checkpoint_of(single) / "optimizer.safetensors").string());
  const auto entries = decode_safetensors(good, "good");
  // One damaged copy of `single` per case: its optimizer.safetensors replaced by `bytes`.
  const auto expect_refused = [&](const std::string& bytes, const std::vector<std::string>& fragments) {
    const auto copy = copy_of(single, "optstate_single_copy");
    replace_checkpoint_file(latest_checkpoint_of(copy), "optimizer.safetensors", bytes);
    auto all = fragments;
    all.push_back(latest_checkpoint_of(copy).string() + "/optimizer.safetensors: ");
    expect_one_line_refusal("train --resume " + copy.string() + " --train.steps 6", all);
    fs::remove_all(copy);
  };
  expect_refused(encode_safetensors({}), {"optimizer state 'layer0.", "missing"});  // emptied
  auto edited = entries;
  for (auto& entry : edited) {
    if (entry.name == "layer1.qkv.weight.step") entry.shape = {2}, entry.bytes += entry.bytes;
  }
  expect_refused(encode_safetensors(edited), {"'layer1.qkv.weight.step'", "one step count"});
  edited = entries;
  for (auto& entry : edited) {
    if (entry.name == "layer1.qkv.weight.exp_avg") std::reverse(entry.shape.begin(), entry.shape.end());
  }
  expect_refused(encode_safetensors(edited), {"'layer1.qkv.weight.exp_avg'", "shape"});

  const auto sgd = finished_short_run("--stages 1 --train.optimizer sgd --train.momentum 0.9", "optstate_sgd");
  replace_checkpoint_file(latest_checkpoint_of(sgd), "optimizer.safetensors", encode_safetensors({}));
  expect_one_line_refusal("train --resume " + sgd.string() + " --train.steps 6",
                          {"optimizer.safetensors: ", ".momentum_buffer' missing"});
  for (const auto& dir : {pipe, single, sgd}) fs::remove_all(dir);
}

std::vector<int64_t> metrics_steps(const fs::path& run_dir) {
  std::vector<int64_t> steps;
  for (const auto& record : read_metrics((run_dir / "metrics.jsonl").string())) {
    steps.push_back(record["step"].get<int64_t>());
  }
  return steps;
}

// A run stopped by SIGTERM and resumed has every step's metrics line exactly once: the stop
// step's line is written before the run stops (issue 16, 3b: pipelines lost it for good).
TEST(Resume, StoppedAndResumedRunHasEveryMetricsLineOnce) {
  const std::vector<int64_t> all_steps = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const std::string mode : {"--stages 2 --schedule 1f1b", "--stages 2 --schedule 2bw", "--stages 1"}) {
    SCOPED_TRACE(mode);
    const std::string args = kTiny + " " + mode + " --checkpoint.every 0";
    const auto dir = testing::fresh_dir("stop_metrics");
    const std::string rank = mode == "--stages 1" ? "0" : "1";
    const auto stopped = testing::run_pipetrain(args + " --run-dir " + dir.string(),
                                                "PIPETRAIN_FAULT=" + rank + ":3:term");
    EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
    const auto checkpoint = latest_checkpoint_of(dir).filename().string();
    const int64_t stop_step = std::stoll(checkpoint.substr(5));
    EXPECT_EQ(metrics_steps(dir), std::vector<int64_t>(all_steps.begin(), all_steps.begin() + stop_step))
        << "after the stop at step " << stop_step;
    const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(metrics_steps(dir), all_steps);
    fs::remove_all(dir);
  }
}

// A stop after the final checkpoint, before the summary (what its writes leave: no sample.txt,
// loss.svg or summary.json): --resume finishes the run, with the summary, plot and final state
// of the run that was not stopped (2BW's: its stashed weight version too); then it has nothing
// left to resume. Likewise where the summary is an earlier run's, of fewer steps.
TEST(Resume, ARunStoppedBeforeItsSummaryFinishesOnResume) {
  for (const std::string mode : {"--stages 1", "--stages 2", "--stages 2 --schedule 2bw"}) {
    SCOPED_TRACE(mode);
    const std::string args = kTiny + " " + mode + " --sample.tokens 4";
    const fs::path& reference = reference_run(args);
    const auto dir = testing::fresh_dir("finish_summary");
    fs::copy(reference, dir, fs::copy_options::recursive);
    for (const char* file : {"summary.json", "loss.svg", "sample.txt"}) fs::remove(dir / file);
    const auto resumed = testing::run_pipetrain("train --quiet --resume " + dir.string());
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_NE(resumed.output.find("before its summary: writing the final checkpoint, sample and summary"),
              std::string::npos) << resumed.output;
    const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
    const auto expected = nlohmann::json::parse(read_file((reference / "summary.json").string()));
    for (const char* key : {"steps", "final_loss", "final_val_loss", "tokens_per_s"}) {
      EXPECT_EQ(summary[key], expected[key]) << key;
    }
    EXPECT_EQ(read_file((dir / "loss.svg").string()), read_file((reference / "loss.svg").string()));
    EXPECT_EQ(read_file((dir / "sample.txt").string()), read_file((reference / "sample.txt").string()));
    expect_same_final_state(dir, reference);
    for (const auto& entry : fs::directory_iterator(reference / "checkpoint")) {  // each stage's, 2BW's versions
      if (entry.path().extension() != ".safetensors") continue;
      const auto name = entry.path().filename();
      EXPECT_TRUE(read_file((dir / "checkpoint" / name).string()) == read_file(entry.path().string())) << name;
    }
    testing::expect_one_line_error("train --resume " + dir.string(), "nothing to resume");
    // The same stop in a run that went on from an earlier one of 4 steps (--resume with
    // --train.steps 8): the summary there is the earlier run's.
    auto earlier = expected;
    earlier["steps"] = 4;
    write_file_atomically((dir / "summary.json").string(), earlier.dump(2));
    const auto continued = testing::run_pipetrain("train --quiet --resume " + dir.string());
    ASSERT_EQ(continued.exit_code, 0) << continued.output;
    const auto finished = nlohmann::json::parse(read_file((dir / "summary.json").string()));
    for (const char* key : {"steps", "final_loss", "final_val_loss"}) EXPECT_EQ(finished[key], expected[key]) << key;
    fs::remove_all(dir);
  }
}

// A run continued without a sample (sample.tokens 0) keeps no sample.txt of the run before it,
// which the launcher used to print as this run's.
TEST(Resume, AContinuedRunWithoutASampleKeepsNoEarlierSample) {
  for (const std::string stages : {"1", "2"}) {
    SCOPED_TRACE("stages " + stages);
    const auto dir = testing::fresh_dir("no_sample");
    ASSERT_EQ(testing::run_pipetrain(kTiny + " --stages " + stages + " --sample.tokens 4 --run-dir " + dir.string()).exit_code, 0);
    ASSERT_TRUE(fs::exists(dir / "sample.txt"));
    const auto resumed = testing::run_pipetrain("train --resume " + dir.string() + " --train.steps 10 --sample.tokens 0");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_FALSE(fs::exists(dir / "sample.txt"));
    EXPECT_EQ(resumed.output.find("--- sample ---"), std::string::npos) << resumed.output;
    fs::remove_all(dir);
  }
}

// Each step's validation loss in metrics.jsonl, as written.
std::map<int64_t, std::string> val_losses(const fs::path& run_dir) {
  std::map<int64_t, std::string> losses;
  for (const auto& record : read_metrics((run_dir / "metrics.jsonl").string())) {
    if (record.contains("val_loss")) losses[record["step"].get<int64_t>()] = record["val_loss"].dump();
  }
  return losses;
}

// A stop during a validation of 4 batches: one mid-run, cut short after its first batch (a
// pipeline's: after its depth), records no val_loss for its step; the final one runs whole, as
// the run's final_val_loss. The resumed run's validations are then the uninterrupted run's.
// (Both used to record a mean of the batches done before the stop.)
TEST(Resume, AStopDuringValidationRecordsOnlyWholeValidations) {
  for (const std::string mode : {"--stages 1", "--stages 2"}) {
    const std::string args = kTiny + " " + mode + " --eval.every 2 --eval.batches 4";
    const fs::path& reference = reference_run(args);
    const auto want = val_losses(reference);
    ASSERT_EQ(want.size(), 4u);
    const std::string rank = mode == "--stages 1" ? "0" : "1";  // the worker that validates
    for (const int stop_step : {4, 8}) {  // a validation mid-run, the last
      SCOPED_TRACE(mode + ", stopped in step " + std::to_string(stop_step));
      const auto dir = testing::fresh_dir("stop_validation");
      const auto stopped = testing::run_pipetrain(
          args + " --run-dir " + dir.string(), fmt::format("PIPETRAIN_FAULT={}:{}:term", rank, stop_step - 1));
      EXPECT_EQ(stopped.exit_code, 128 + SIGTERM) << stopped.output;
      ASSERT_EQ(latest_checkpoint_of(dir).filename().string(), fmt::format("step-{:06d}", stop_step));
      auto expected = want;
      if (stop_step == 4) expected.erase(4);
      auto recorded = val_losses(dir);
      const std::map<int64_t, std::string> expected_so_far(expected.begin(), expected.upper_bound(stop_step));
      EXPECT_EQ(recorded, expected_so_far);
      const auto resumed = testing::run_pipetrain(args + " --resume " + dir.string());
      ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
      EXPECT_EQ(val_losses(dir), expected);
      const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
      const auto uninterrupted = nlohmann::json::parse(read_file((reference / "summary.json").string()));
      EXPECT_EQ(summary["final_val_loss"], uninterrupted["final_val_loss"]);
      fs::remove_all(dir);
    }
  }
}

// --overwrite starts afresh: the previous run's checkpoints, `latest` and final checkpoint/ are
// gone before the new run's first step, so a new run killed before its first checkpoint has
// nothing to resume; files that are not a run's outputs stay (issue 16, 3c: it resumed from
// the previous run's checkpoint under the new config).
TEST(Resume, OverwriteRemovesThePreviousRunsCheckpoints) {
  for (const std::string stages : {"1", "2"}) {
    SCOPED_TRACE("stages " + stages);
    const auto dir = finished_short_run("--stages " + stages, "overwrite" + stages);
    write_file_atomically((dir / "notes.txt").string(), "mine");
    write_file_atomically((dir / "checkpoints" / "notes.txt").string(), "mine too");
    // Killed after its first step, before its first checkpoint (step 2).
    const auto killed = testing::run_pipetrain(
        kShort + " --stages " + stages + " --train.lr 0.01 --overwrite --run-dir " + dir.string(),
        "PIPETRAIN_FAULT=0:1");
    EXPECT_NE(killed.exit_code, 0) << killed.output;
    EXPECT_FALSE(fs::exists(dir / "checkpoints" / "latest"));
    EXPECT_FALSE(fs::exists(dir / "checkpoints" / "step-000004"));
    EXPECT_FALSE(fs::exists(dir / "checkpoint"));
    EXPECT_FALSE(fs::exists(dir / "summary.json"));
    EXPECT_EQ(read_file((dir / "notes.txt").string()), "mine");
    EXPECT_EQ(read_file((dir / "checkpoints" / "notes.txt").string()), "mine too");
    expect_one_line_refusal("train --resume " + dir.string() + " --train.steps 6",
                            {"has no complete checkpoint"});
    fs::remove_all(dir);
  }
}

// A flipped bit inside a checkpoint's tensor data (weights, optimizer state, a 2BW stashed
// version) is refused by the file's CRC32C in checkpoint.json (issue 16, 3i: it resumed).
TEST(Resume, FlippedBitInTensorDataIsRefusedByItsChecksum) {
  struct Case {
    std::string mode, file;
  };
  const std::vector<Case> cases = {{"--stages 1", "model.safetensors"},
                                   {"--stages 1", "optimizer.safetensors"},
                                   {"--stages 2", "stage1.safetensors"},
                                   {"--stages 2 --schedule 2bw", "stage0.version3.safetensors"}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode + " " + c.file);
    const auto dir = finished_short_run(c.mode, "bitflip");
    const auto path = (latest_checkpoint_of(dir) / c.file).string();
    std::string bytes = read_file(path);
    bytes[bytes.size() - 3] ^= 0x10;  // the last tensor's data, past the header
    write_file_atomically(path, bytes);
    expect_one_line_refusal("train --resume " + dir.string() + " --train.steps 6",
                            {path + ": damaged", "CRC32C"});
    fs::remove_all(dir);
  }
}

// What a kill -9 during a checkpoint leaves (a .partial folder, temp files of atomic writes)
// is removed when the run resumes; other files stay (issue 16, 3i: nothing removed them).
TEST(Resume, ResumeRemovesWhatInterruptedWritesLeft) {
  const auto dir = finished_short_run("--stages 1", "leftovers");
  const std::vector<fs::path> leftovers = {
      dir / "checkpoints" / "step-000005.partial" / "model.safetensors",
      dir / "checkpoints" / "latest.tmp.4242", dir / "checkpoint" / "model.safetensors.tmp.4242",
      dir / "checkpoint" / "checkpoint.json.tmp.77", dir / "summary.json.tmp.4242"};
  const std::vector<fs::path> foreign = {dir / "checkpoint" / "notes.tmp.4242", dir / "notes.tmp.1",
                                         dir / "checkpoints" / "step-000005.backup"};
  for (const auto& path : leftovers) fs::create_directories(path.parent_path()), write_file_atomically(path.string(), "x");
  for (const auto& path : foreign) fs::create_directories(path.parent_path()), write_file_atomically(path.string(), "x");
  const auto resumed = testing::run_pipetrain("train --resume " + dir.string() + " --train.steps 6");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  for (const auto& path : leftovers) EXPECT_FALSE(fs::exists(path)) << path;
  EXPECT_FALSE(fs::exists(dir / "checkpoints" / "step-000005.partial"));
  for (const auto& path : foreign) EXPECT_TRUE(fs::exists(path)) << path;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
