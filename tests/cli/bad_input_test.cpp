// A sample of docs/reliability.md's bad-input table, checked on every test run: damaged or
// mismatched checkpoints and reused run folders get one line and exit 2, and a failed run
// changes nothing already written.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "../pipetrain_run.h"
#include "io/checkpoint_dir.h"
#include "io/crc32c.h"
#include "io/safetensors.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kTiny =
    "train --quiet --model.layers 1 --model.d_model 16 --model.heads 1 --model.seq_len 8 "
    "--train.batch_size 4 --train.microbatches 2 --train.steps 3 --eval.every 0 "
    "--eval.batches 1 --sample.tokens 0 --train.threads 1 --checkpoint.every 1";

using Result = testing::ProcessResult;

// Runs that train or profile: the default limit (a 2-stage run beside another test on 2 cores
// may take a while to start). Refusals: a minute.
Result run(const std::string& args) { return testing::run_pipetrain(args); }

void expect_one_line_error(const std::string& args, const std::string& fragment) {
  testing::expect_one_line_error(args, fragment, 60);
}

// A finished 2-step run of kTiny ( --train.steps 2) to damage; resumed to 3 steps.
fs::path finished_run(const std::string& name) {
  const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_" + name + std::to_string(getpid()));
  fs::remove_all(dir);
  EXPECT_EQ(run(kTiny + " --stages 1 --train.steps 2 --run-dir " + dir.string()).exit_code, 0);
  return dir;
}

fs::path latest(const fs::path& dir) {
  std::string name = read_file((dir / "checkpoints" / "latest").string());
  name.pop_back();
  return dir / "checkpoints" / name;
}

std::string snapshot(const fs::path& dir) {
  std::string all;
  for (const char* file : {"config.toml", "metrics.jsonl", "checkpoints/latest"}) {
    all += read_file((dir / file).string());
  }
  return all + read_file((latest(dir) / "model.safetensors").string());
}

TEST(BadInput, DamagedCheckpointsAreOneLineAndChangeNothing) {
  const auto dir = finished_run("damaged");
  const auto weights = latest(dir) / "model.safetensors";
  const std::string good = read_file(weights.string());
  write_file_atomically(weights.string(), good.substr(0, good.size() / 2));
  const std::string before = snapshot(dir);
  for (const std::string stages : {"1", "2"}) {  // 2: the launcher refuses before any worker
    expect_one_line_error("train --resume " + dir.string() + " --train.steps 3 --stages " + stages,
                          "model.safetensors");
  }
  EXPECT_EQ(snapshot(dir), before) << "a failed resume changed the run folder";
  write_file_atomically(weights.string(), "\xff\xff\xff\xff\xff\xff\xff\x7fgarbage");
  expect_one_line_error("train --resume " + dir.string() + " --train.steps 3", "model.safetensors");
  write_file_atomically(weights.string(), good);
  const auto sidecar = (latest(dir) / "checkpoint.json").string();
  write_file_atomically(sidecar, "{\"format\": \"pipetrain-checkpoint-2\", \"step\": \"x\"}");
  expect_one_line_error("train --resume " + dir.string() + " --train.steps 3", "checkpoint.json");
  fs::remove_all(dir);
}

TEST(BadInput, MismatchedResumeIsRefusedAndChangesNothing) {
  const auto dir = finished_run("mismatch");
  const std::string before = snapshot(dir);
  expect_one_line_error("train --resume " + dir.string() + " --train.steps 3 --model.d_model 32",
                        "checkpoint of a different model");
  expect_one_line_error("train --resume " + dir.string() + " --train.steps 3 --train.optimizer adam",
                        "cannot continue exactly");
  expect_one_line_error("train --resume " + dir.string() + " --train.steps 3 --stages 2 --train.optimizer sgd",
                        "cannot continue exactly");
  expect_one_line_error("train --resume " + dir.string(), "nothing to resume");
  EXPECT_EQ(snapshot(dir), before) << "a failed run changed the run folder";
  fs::remove_all(dir);
}

TEST(BadInput, ARunFolderThatHoldsARunIsNotOverwritten) {
  const auto dir = finished_run("reuse");
  const std::string before = snapshot(dir);
  for (const std::string stages : {"1", "2"}) {
    expect_one_line_error(kTiny + " --stages " + stages + " --run-dir " + dir.string(), "already holds a run");
  }
  EXPECT_EQ(snapshot(dir), before);
  fs::remove_all(dir);
}

// A partition splits the layers over pipeline stages: with one stage a split is refused, not
// silently ignored (issue 16, 3d); one count holding every layer is what one stage runs anyway.
TEST(BadInput, PartitionWithOneStageIsRefusedUnlessItHoldsEveryLayer) {
  const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_partition" + std::to_string(getpid()));
  fs::remove_all(dir);
  expect_one_line_error(kTiny + " --stages 1 --partition 1,2 --run-dir " + dir.string(),
                        "pipeline.partition '1,2' splits the 3 layers over 2 stages, but pipeline.stages is 1");
  EXPECT_FALSE(fs::exists(dir));
  EXPECT_EQ(run(kTiny + " --stages 1 --partition 3 --run-dir " + dir.string()).exit_code, 0);
  fs::remove_all(dir);
}

// Sizes whose run cannot fit: one line naming the memory needed and the machine's, before any
// tensor is allocated or anything is written (they allocated until killed, or died with an
// "internal error").
TEST(BadInput, RunsThatCannotFitInMemoryAreRefusedBeforeAllocating) {
  const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_huge" + std::to_string(getpid()));
  fs::remove_all(dir);
  for (const std::string args : {"--stages 1 --model.layers 1000000000",
                                 "--stages 2 --model.layers 1000000000",
                                 "--stages 1 --model.d_model 2147483648",
                                 "--stages 1 --model.vocab_size 1000000000",
                                 "--stages 2 --model.vocab_size 1000000000",
                                 "--stages 1 --train.batch_size 2000000000",
                                 // 100001 processes (each loads libtorch) on one machine
                                 "--stages 100000 --model.layers 200000"}) {
    expect_one_line_error(kTiny + " " + args + " --run-dir " + dir.string(),
                          "), more than this machine's");
    EXPECT_FALSE(fs::exists(dir)) << args;
  }
  fs::remove_all(dir);  // in case one was created
}

// --launch-file names what our launcher tells a worker it spawns (RANK set): not a user's option.
TEST(BadInput, LaunchFileOutsideALaunchedWorkerIsRefused) {
  expect_one_line_error(kTiny + " --stages 2 --launch-file launch-node0.json",
                        "--launch-file is for the workers pipetrain's launcher starts");
}

// CI machines have no GPU: a run that asks for one says so in one line, before any folder is
// made, on one process and on pipeline workers alike. (Where `pipetrain --version` sees a GPU
// there is nothing to refuse.)
TEST(BadInput, CudaWithoutAGpuIsOneLine) {
  const Result version = run("--version");
  if (version.output.find(" 0 GPUs seen") == std::string::npos) GTEST_SKIP() << version.output;
  for (const char* stages : {"1", "2"}) {
    const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_cuda" + std::to_string(getpid()));
    expect_one_line_error(kTiny + " --train.device cuda --stages " + stages + " --run-dir " + dir.string(),
                          "train.device = \"cuda\" but no GPU is usable here");
    EXPECT_FALSE(fs::exists(dir));
  }
}

TEST(BadInput, ThreadCountIsBoundedByTheCores) {
  for (const std::string stages : {"1", "2"}) {
    expect_one_line_error(kTiny + " --stages " + stages + " --train.threads 100000",
                          "train.threads 100000 is more than");
  }
}

// ZeRO-1 keeps a shard of the optimizer state per replica, which the schedules that extrapolate
// weights with that state cannot read: refused in one line naming the ones that run with it.
TEST(BadInput, ZeroOneWithAPredictingScheduleIsRefused) {
  for (const std::string schedule : {"pipeoptim", "spectrain", "2bw-predict"}) {
    expect_one_line_error(kTiny + " --stages 2 --train.microbatches 2 --dp-width 2 --zero1 --schedule " +
                              schedule + " --train.batch_size 4",
                          "pipeline.zero1 = 1 runs with the schedules gpipe, 1f1b, interleaved, bfs, "
                          "zb-h1, zb-h2, zb-v, dualpipev, 2bw, pipedream, pipedream-nostash only; pipeline.schedule '" +
                              schedule + "' extrapolates its weights");
  }
}

// A synchronous warm-up belongs to 2BW: a flushing schedule (which the single-process trainer
// would run, ignoring it) and 2bw-predict (whose versions are extrapolated) refuse it.
TEST(BadInput, SyncWarmupWithAnotherScheduleIsRefused) {
  for (const std::string run : {"--stages 1 --schedule 1f1b", "--stages 2 --schedule gpipe",
                                "--stages 2 --schedule 2bw-predict", "--stages 2 --schedule pipedream"}) {
    const std::string schedule = run.substr(run.rfind(' ') + 1);
    expect_one_line_error(kTiny + " " + run + " --pipeline.sync_warmup_steps 3",
                          "schedule " + schedule + ": a synchronous warm-up (pipeline.sync_warmup_steps "
                          "= 3) is only supported by 2bw");
  }
}

TEST(BadInput, DataPathMustBeARegularFile) {
  expect_one_line_error(kTiny + " --stages 1 --data.path /dev/zero",
                        "data file '/dev/zero' is not a regular file");
  expect_one_line_error(kTiny + " --stages 2 --data.path /dev/zero",
                        "data file '/dev/zero' is not a regular file");
  const std::string folder = fs::temp_directory_path().string();
  expect_one_line_error(kTiny + " --stages 1 --data.path " + folder,
                        "data file '" + folder + "' is a folder, not a file");
}

TEST(BadInput, UnknownModelKindNamesTheKnownOnes) {
  for (const std::string stages : {"1", "2"}) {
    const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_kind" + std::to_string(getpid()));
    fs::remove_all(dir);
    expect_one_line_error(kTiny + " --stages " + stages + " --model.kind rnn --run-dir " + dir.string(),
                          "model.kind must be one of gpt, llama, cnn, torchscript, transducer, got 'rnn'");
    EXPECT_FALSE(fs::exists(dir)) << "stages " << stages;  // refused before the run folder
  }
}

// A training split shaped unlike the validation split (rows of 12 tokens for a model of 16, its
// validation rows of 16): one line before anything runs. Only a validation row was checked, and a
// pipeline then aborted inside Gloo while one process trained on the wrong rows.
TEST(BadInput, ATrainingSplitShapedUnlikeTheValidationSplitIsNamed) {
  const fs::path dir = testing::fresh_dir("split_shapes");
  fs::create_directories(dir);
  const auto tokens = [](int64_t rows, int64_t length) {
    return std::string(size_t(rows * length * 8), '\0');  // int64 zeros
  };
  const std::vector<TensorEntry> tensors = {{"train_inputs", "I64", {4, 12}, tokens(4, 12)},
                                            {"train_labels", "I64", {4, 12}, tokens(4, 12)},
                                            {"val_inputs", "I64", {4, 8}, tokens(4, 8)},
                                            {"val_labels", "I64", {4, 8}, tokens(4, 8)}};
  const std::string file = (dir / "data.safetensors").string();
  write_file_atomically(file, encode_safetensors(tensors));
  for (const std::string stages : {"1", "2"}) {
    expect_one_line_error(kTiny + " --stages " + stages + " --data.format safetensors --data.path " + file,
                          "brings training inputs Long [1, 12] for one row, but model.kind 'gpt' takes Long [1, 8]");
  }
  fs::remove_all(dir);
}

// Named together before the data's reader checks it against the model (which gave a GPT on
// speech data "raise model.seq_len" and a transducer on token files advice on vocab_size).
TEST(BadInput, ModelAndDataThatDoNotFitAreNamedTogether) {
  for (const std::string stages : {"1", "2"}) {
    expect_one_line_error(kTiny + " --stages " + stages + " --model.kind cnn",
                          "data.format 'bytes' is not data for model.kind 'cnn', which trains on fashion-mnist, "
                          "safetensors");
  }
  expect_one_line_error(kTiny + " --stages 1 --data.format speech --data.path /nonexistent/features.bin",
                        "data.format 'speech' is not data for model.kind 'gpt', which trains on bytes, tokens, "
                        "safetensors");
}

TEST(BadInput, FashionMnistFolderMissingNamesThePackage) {
  const std::string folder = pipetrain::testing::fresh_dir("no_fashion").string();
  fs::create_directories(folder);  // there, but without the IDX files
  expect_one_line_error(kTiny + " --stages 1 --model.kind cnn --data.format fashion-mnist --data.path " + folder,
                        folder + "/train-images-idx3-ubyte");
  fs::remove_all(folder);
}

TEST(BadInput, SpeechFeatureFileMissingSaysHowToMakeIt) {
  const std::string path = (testing::fresh_dir("no_speech") / "features.bin").string();
  for (const std::string stages : {"1", "2"}) {
    expect_one_line_error(kTiny + " --stages " + stages + " --model.kind transducer --data.format speech "
                          "--data.path " + path,
                          "cannot read speech feature file '" + path + "': No such file or directory "
                          "(make it with `pipetrain prepare-speech`)");
  }
}

TEST(BadInput, ConfigReferenceValidatesOverrides) {
  expect_one_line_error("config --reference --model.layers 0", "model.layers must be >= 1, got 0");
  expect_one_line_error("config --reference --model.layerz 2", "unknown config field 'model.layerz'");
}

TEST(BadInput, ResumeOfAFileSaysItIsNotARunFolder) {
  const auto file = fs::temp_directory_path() / ("pipetrain_badinput_file" + std::to_string(getpid()));
  write_file_atomically(file.string(), "x");
  expect_one_line_error("train --resume " + file.string(),
                        "--resume: '" + file.string() + "' is a file, not a run folder");
  fs::remove(file);
}

TEST(BadInput, MisspelledCommandSuggestsTheNearestOne) {
  expect_one_line_error("trian", "unknown command 'trian' (did you mean 'train'?)");
  expect_one_line_error("", "a command is required: train, simulate,");
  EXPECT_EQ(run("--help").exit_code, 0);
}

// The measuring and planning commands' options: one line, exit 2, before any work. (Before:
// terapipe-plan --profile with --granularity 0 died of SIGFPE; simulate took "0x10" as 16 and
// nan as a time; profile --repeats 2^32 wrapped to 0 repeats and crashed; profile and plan
// wrote into a missing folder only after measuring or planning; config printed configs train
// refuses; the reference said beta2, val_fraction and temperature took what they refuse.)
TEST(BadInput, CommandOptionsAreOneLineBeforeAnyWork) {
  const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_options" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string tiny = "--model.layers 2 --model.d_model 16 --model.heads 1 --model.seq_len 8";
  const std::string slices = (dir / "slices.json").string(), missing = (dir / "nowhere" / "out.json").string();
  ASSERT_EQ(run("terapipe-profile " + tiny + " --repeats 1 --out " + slices).exit_code, 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"terapipe-plan --profile " + slices + " --stages 2 --granularity 0", "--granularity must be at least 1, got 0"},
      {"terapipe-plan --profile " + slices + " --stages 3", "--stages 3 is more than the profiled model's 2 blocks"},
      {"terapipe-plan --profile " + slices + " --svg x.svg", "--svg is for the analytic plan"},
      {"terapipe-plan --tensor-parallel 0", "--tensor-parallel must be at least 1, got 0"},
      {"terapipe-plan --granularity 4096", "--granularity 4096 is longer than the sequence of 2048 tokens"},
      {"terapipe-plan --seq -5", "--seq must be at least 1, got -5"},
      {"simulate --stages 0x10", "--stages: expected a whole number (plain decimal), got '0x10'"},
      {"simulate --stages 2147483648", "--stages: 2147483648 is out of range"},
      {"simulate --forward-ms nan", "--forward-ms: expected a finite number (plain decimal, such as 2.5 or 1e-3), got 'nan'"},
      {"simulate --latency-ms inf", "--latency-ms: expected a finite number"},
      {"simulate --load " + slices + " --stages 8", "simulate: --stages shapes a generated schedule; --load simulates"},
      {"simulate --svg " + missing, "--svg: cannot write '" + missing + "': folder '"},
      {"profile " + tiny + " --repeats 4294967296 --out x.json", "--repeats: expected a whole number from 1 to 1000000"},
      {"profile " + tiny + " --microbatch-sizes 2,1,2 --out x.json", "--microbatch-sizes: 2 is given twice"},
      {"profile " + tiny + " --cluster nowhere --out x.json", "cluster 'nowhere' not found (neither a file nor"},
      {"profile " + tiny + " --out " + missing, "--out: cannot write '" + missing + "'"},
      {"terapipe-profile " + tiny + " --out " + missing, "--out: cannot write '" + missing + "'"},
      {"plan --out " + missing, "--out: cannot write '" + missing + "'"},
      {"plan --profile " + slices + " --model gpt2-xl", "plan: --profile plans the profiled model; give it without --model"},
      {"plan --max-workers 3", "plan: --max-workers goes with --memory-per-worker"},
      {"tokenizer train --vocab 400 --max-sentences 3 x.txt --out x.model", "--max-sentences must be 0 (all lines) or more than 100, got 3"},
      {"config --model.kind GPT", "model.kind must be one of gpt,"},
      {"config --pipeline.stages 2 --pipeline.partition foo", "pipeline.partition: expected"},
      {"config --data.format nope", "data.format must be one of bytes,"},
      {"config --train.beta2 1", "train.beta2 must be < 1, got 1"},
      {"config --sample.temperature 0", "sample.temperature must be > 0, got 0"},
      {"config --data.val_fraction 0", "data.val_fraction must be > 0, got 0"},
      {"config --log.profile_step 900", "log.profile_step 900 is after the run's last step (train.steps 800)"}};
  for (const auto& [args, fragment] : cases) expect_one_line_error(args, fragment);
  EXPECT_EQ(run("config --train.device cuda --train.cuda_graphs 1 --pipeline.stages 2").exit_code, 0)
      << "a GPU's config printed on a machine without one";
  EXPECT_FALSE(fs::exists(dir / "nowhere"));
  fs::remove_all(dir);
}

// evaluate checks the run against the machine as train does: a batch no memory holds is one
// line, not a process the kernel kills without a word.
TEST(BadInput, AnEvaluationThatCannotFitIsRefusedBeforeAllocating) {
  const auto dir = finished_run("evaluate_huge");
  expect_one_line_error("evaluate --run-dir " + dir.string() + " --train.batch_size 2000000000",
                        "), more than this machine's");
  fs::remove_all(dir);
}

TEST(BadInput, PlanWithABatchTooLargeSaysSo) {
  expect_one_line_error("plan --global-batch 4611686018427387904",
                        "--global-batch 4611686018427387904 is too large");
}

// A stage file of a wider model in a pipeline checkpoint: refused by the launcher, before it
// rewrites config.toml, in one line (the workers found it after the rewrite, 3 lines).
TEST(BadInput, WiderStageFileIsRefusedBeforeAnythingIsRewritten) {
  const auto dir = fs::temp_directory_path() / ("pipetrain_badinput_narrow" + std::to_string(getpid()));
  const auto wide = fs::temp_directory_path() / ("pipetrain_badinput_wide" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::remove_all(wide);
  ASSERT_EQ(run(kTiny + " --stages 2 --train.steps 2 --run-dir " + dir.string()).exit_code, 0);
  ASSERT_EQ(run(kTiny + " --stages 2 --train.steps 2 --model.d_model 32 --run-dir " + wide.string()).exit_code, 0);
  // Stage 0 of the wider run, weights and optimizer state, with their checksums recorded as if
  // the run had written them: the shape check against the model must catch it.
  const auto sidecar = latest(dir) / "checkpoint.json";
  CheckpointInfo info = parse_checkpoint_info(read_file(sidecar.string()), sidecar.string());
  for (const char* file : {"stage0.safetensors", "stage0.optimizer.safetensors"}) {
    fs::copy_file(latest(wide) / file, latest(dir) / file, fs::copy_options::overwrite_existing);
    info.crc32c[file] = crc32c_hex(read_file((latest(dir) / file).string()));
  }
  write_file_atomically(sidecar.string(), checkpoint_info_json(info));
  const std::string config = read_file((dir / "config.toml").string());
  expect_one_line_error("train --resume " + dir.string() + " --train.steps 4 --stages 2",
                        "tensor 'layer0.token_weight' has shape [256, 32], the model needs [256, 16]");
  EXPECT_EQ(read_file((dir / "config.toml").string()), config) << "config.toml was rewritten";
  fs::remove_all(dir);
  fs::remove_all(wide);
}

}  // namespace
}  // namespace pipetrain
