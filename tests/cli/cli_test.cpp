// Runs the real `pipetrain` binary: what a user types, what a user sees.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "core/files.h"
#include "core/terminal_text.h"
#include "io/metrics.h"
#include "../pipetrain_run.h"
#include "../tiny_images.h"
#include "schedule/catalogue.h"

namespace {

namespace fs = std::filesystem;

using Result = pipetrain::testing::ProcessResult;

Result run(const std::string& args) { return pipetrain::testing::run_pipetrain(args, "", 300); }

// This process's own (absent) folder: test binaries of two checkouts never share one.
fs::path temp_dir(const std::string& name) { return pipetrain::testing::fresh_dir("cli_" + name); }

void expect_one_line_error(const std::string& args, const std::string& fragment) {
  pipetrain::testing::expect_one_line_error(args, fragment, 300);
}

TEST(Cli, BadInputGetsOneClearLine) {
  expect_one_line_error("train --model.layerz 2", "did you mean 'model.layers'?");
  expect_one_line_error("train --model.layers two", "expected an integer, got 'two'");
  expect_one_line_error("train --train.batch_size -4", "must be >= 1, got -4");
  expect_one_line_error("train --data.path /nonexistent/text.txt", "not found");
  expect_one_line_error("train --run-dir /proc/pipetrain/x", "cannot create run folder");
  expect_one_line_error("train /nonexistent/config.toml", "cannot read config file");
  expect_one_line_error("train --bogus", "unknown option '--bogus'");
  expect_one_line_error("train --train.steps", "--train.steps needs a value");
  expect_one_line_error("train --stages 2 --zero1", "needs pipeline.dp_width >= 2");
  expect_one_line_error("train --resume runs/x --overwrite", "--resume continues the run in runs/x and --overwrite would remove it");
  // No GPU here (the CPU test machines): graphs replay steps on a GPU only.
  expect_one_line_error("train --pipeline.stages 1 --train.device cpu --train.cuda_graphs 1",
                        "replays steps on a GPU, but this run computes on the CPU");
}

// `config` resolves what `train` would run, train's pipeline shorthands included.
TEST(Cli, ConfigTakesTrainsShorthands) {
  const Result shown = run("config --stages 2 --schedule zb-h1 --microbatches 4 --dp-width 2 --zero1");
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  for (const std::string line : {"\nstages = 2\n", "\nschedule = \"zb-h1\"\n", "\nmicrobatches = 4\n",
                                 "\ndp_width = 2\n", "\nzero1 = 1\n"}) {
    EXPECT_NE(shown.output.find(line), std::string::npos) << line << shown.output;
  }
  // A partition train's launcher measures is checked as the balanced cut it starts from (it was
  // refused with torchrun's message).
  const Result measured = run("config --stages 4 --pipeline.partition measured");
  ASSERT_EQ(measured.exit_code, 0) << measured.output;
  EXPECT_NE(measured.output.find("\npartition = \"measured\"\n"), std::string::npos) << measured.output;
  expect_one_line_error("config --stages 7 --pipeline.partition measured", "exceeds the model's 6 layers");
}

// A memory budget keeps a worker to its stage, but a one-stage pipeline's workers hold the whole
// model: its checkpoint is assembled into model.safetensors and it writes its sample (it said
// "not assembled" for any budget).
TEST(Cli, AOneStageRunUnderAMemoryBudgetAssemblesItsModel) {
  const auto dir = temp_dir("budget_one_stage");
  const Result trained = run("train --model.layers 1 --model.d_model 16 --model.heads 2 --model.seq_len 16 "
                             "--train.batch_size 4 --train.microbatches 1 --train.steps 1 --stages 1 --dp-width 2 "
                             "--pipeline.memory_budget_mb 4000 --eval.batches 1 --sample.tokens 8 --quiet --run-dir " +
                             dir.string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_EQ(trained.output.find("not assembled"), std::string::npos) << trained.output;
  EXPECT_NE(trained.output.find(" tokens/s, final loss"), std::string::npos) << trained.output;  // its data's unit
  EXPECT_TRUE(fs::exists(dir / "checkpoint" / "model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "sample.txt"));
  fs::remove_all(dir);
}

TEST(Cli, MalformedAndMistypedConfigFiles) {
  const auto dir = temp_dir("configs");
  fs::create_directories(dir);
  std::ofstream(dir / "bad.toml") << "[model]\nlayers = = 2\n";
  std::ofstream(dir / "typed.toml") << "[train]\nlr = \"fast\"\n";
  expect_one_line_error("train " + (dir / "bad.toml").string(), "malformed TOML");
  expect_one_line_error("train " + (dir / "typed.toml").string(), "train.lr must be a number");
  fs::remove_all(dir);
}

TEST(Cli, TinyTrainingRunWritesTheRunFolder) {
  const auto dir = temp_dir("run");
  const Result result = run(
      "train --model.layers 1 --model.d_model 16 --model.heads 2 --model.seq_len 16 "
      "--train.batch_size 4 --train.microbatches 2 --train.steps 6 --train.warmup_steps 2 --eval.every 3 "
      "--eval.batches 1 --log.every 2 --sample.tokens 20 --quiet --run-dir " + dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("--- sample ---\nROMEO:"), std::string::npos) << result.output;
  // The terminal sees the sample with its control and non-UTF-8 bytes escaped; sample.txt holds
  // what was generated (a 6-step byte-level model's 20 bytes: near random).
  std::string generated = pipetrain::read_file((dir / "sample.txt").string());
  while (!generated.empty() && generated.back() == '\n') generated.pop_back();  // as the summary reads it
  ASSERT_FALSE(generated.empty());
  const pipetrain::TerminalText printed = pipetrain::terminal_text(generated);
  EXPECT_NE(result.output.find("--- sample ---\n" + printed.text + "\n-----"), std::string::npos) << result.output;
  EXPECT_EQ(result.output.find("\x1b"), std::string::npos);
  EXPECT_EQ(result.output.find(fmt::format("({} of its bytes shown as \\xNN", printed.escaped_bytes)) != std::string::npos,
            printed.escaped_bytes > 0) << result.output;
  for (const char* file : {"metrics.jsonl", "loss.svg", "config.toml", "sample.txt",
                           "summary.json", "checkpoint/model.safetensors",
                           "checkpoint/optimizer.safetensors", "checkpoint/checkpoint.json"}) {
    EXPECT_TRUE(fs::exists(dir / file)) << file;
  }
  const auto records = pipetrain::read_metrics((dir / "metrics.jsonl").string());
  std::vector<int> steps, val_steps;
  for (const auto& record : records) {
    for (const char* key : {"step", "loss", "lr", "tokens_per_s"}) EXPECT_TRUE(record.contains(key)) << key;
    steps.push_back(record["step"]);
    if (record.contains("val_loss")) val_steps.push_back(record["step"]);
  }
  EXPECT_EQ(steps, (std::vector<int>{1, 2, 3, 4, 6}));
  EXPECT_EQ(val_steps, (std::vector<int>{3, 6}));
  // the dumped config reproduces the run's settings
  const Result shown = run("config " + (dir / "config.toml").string());
  EXPECT_NE(shown.output.find("layers = 1"), std::string::npos) << shown.output;
  // the same folder is not silently overwritten
  const Result again = run("train --train.steps 1 --run-dir " + dir.string());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.output.find("already holds a run"), std::string::npos) << again.output;
  fs::remove_all(dir);
}

TEST(Cli, TrainRunsAPlanFile) {
  const auto dir = temp_dir("plan");
  fs::create_directories(dir);
  // What `pipetrain plan --out` writes (the fields train reads).
  std::ofstream(dir / "plan.json") << R"({"format": "pipetrain-plan-1", "model": "profiled",
    "model_shape": {"layers": 2, "hidden": 16, "heads": 2, "seq_len": 16, "vocab": 256},
    "schedule": "gpipe", "stages": 2, "dp_width": 1, "microbatch_size": 2, "microbatches": 3,
    "recompute": true, "partition": [1, 3]})";
  const auto run_dir = dir / "run";
  const Result result = run("train --plan " + (dir / "plan.json").string() +
                            " --train.steps 2 --eval.every 0 --eval.batches 1 --sample.tokens 0 "
                            "--quiet --run-dir " + run_dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const Result shown = run("config " + (run_dir / "config.toml").string());
  for (const char* line : {"layers = 2", "d_model = 16", "batch_size = 6", "microbatches = 3",
                           "schedule = \"gpipe\"", "partition = \"1,3\"", "recompute = \"all\""}) {
    EXPECT_NE(shown.output.find(line), std::string::npos) << line << "\n" << shown.output;
  }
  // A field after --plan overrides the plan's.
  const Result overridden = run("train --plan " + (dir / "plan.json").string() +
                                " --pipeline.partition 3,1 --train.steps 1 --eval.every 0 "
                                "--eval.batches 1 --sample.tokens 0 --quiet --run-dir " +
                                (dir / "run2").string());
  ASSERT_EQ(overridden.exit_code, 0) << overridden.output;
  EXPECT_NE(overridden.output.find("stage 0: layers 0-2"), std::string::npos) << overridden.output;
  std::ofstream(dir / "not_a_plan.json") << R"({"stages": 2})";
  expect_one_line_error("train --plan " + (dir / "not_a_plan.json").string(), "not a pipetrain plan");
  expect_one_line_error("train --plan " + (dir / "missing.json").string(), "missing.json");
  expect_one_line_error("train --plan", "--plan needs a plan file");
  fs::remove_all(dir);
}

// pipeline.partition = "measured": the launcher times the layers once, says what it measured and
// chose, the workers run that cut, and config.toml holds the counts (a resume cuts the same way).
TEST(Cli, MeasuredPartitionIsTimedOnceAndKeptAsCounts) {
  const auto dir = temp_dir("measured_partition");
  const Result result = run("train --model.layers 3 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
                            "--train.batch_size 4 --train.microbatches 2 --train.steps 2 --stages 2 "
                            "--pipeline.partition measured --eval.every 0 --eval.batches 1 "
                            "--sample.tokens 0 --quiet --run-dir " + dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto timings = [](const std::string& output) {
    size_t count = 0;
    for (auto at = output.find("timing the model's layers"); at != std::string::npos;
         at = output.find("timing the model's layers", at + 1)) {
      ++count;
    }
    return count;
  };
  EXPECT_NE(result.output.find("timing the model's layers at 2 rows a microbatch"), std::string::npos)
      << result.output;
  EXPECT_EQ(timings(result.output), 1u) << result.output;  // by the launcher, not by each worker
  const auto chosen = result.output.find("-> partition ");
  ASSERT_NE(chosen, std::string::npos) << result.output;
  const std::string counts = result.output.substr(chosen + 13, result.output.find('\n', chosen) - chosen - 13);
  const auto comma = counts.find(',');
  ASSERT_NE(comma, std::string::npos) << counts;
  EXPECT_EQ(std::stoi(counts.substr(0, comma)) + std::stoi(counts.substr(comma + 1)), 5) << counts;
  // The workers cut there: stage 0 holds the first count's layers.
  const std::string stage0 = "stage 0: layers 0-" + std::to_string(std::stoi(counts.substr(0, comma)) - 1);
  EXPECT_NE(result.output.find(stage0), std::string::npos) << stage0 << "\n" << result.output;
  const Result shown = run("config " + (dir / "config.toml").string());
  EXPECT_NE(shown.output.find("partition = \"" + counts + "\""), std::string::npos) << shown.output;
  // A resume takes the kept counts: no timing, the same cut.
  const Result resumed = run("train --resume " + dir.string() + " --train.steps 3 --quiet");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(timings(resumed.output), 0u) << resumed.output;
  EXPECT_NE(resumed.output.find(stage0), std::string::npos) << stage0 << "\n" << resumed.output;
  fs::remove_all(dir);
}

// The planner's d x w 2BW plans run: `pipetrain plan` on a profile of a small model and a
// 4-device cluster writes every plan that fits; a 2BW plan of 2 stages x 2 replicas (the
// ranking follows measured timings, the candidates do not) trains with `train --plan`, and so
// does one that recomputes (2BW's backward reads its forward's weights: it recomputes exactly).
TEST(Cli, PlannersDataParallelTwoBWPlanTrains) {
  const auto dir = temp_dir("plan_2bw_wide");
  fs::create_directories(dir);
  const std::string model = "--model.layers 2 --model.d_model 16 --model.heads 2 --model.seq_len 16";
  const Result profiled = run("profile " + model + " --microbatch-sizes 1,2 --repeats 1 --out " +
                              (dir / "profile.json").string());
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  std::ifstream machine(std::string(PIPETRAIN_SOURCE_DIR) + "/clusters/this-machine.toml");
  std::string cluster((std::istreambuf_iterator<char>(machine)), std::istreambuf_iterator<char>());
  cluster = std::regex_replace(cluster, std::regex("devices_per_node = 2"), "devices_per_node = 4");
  std::ofstream(dir / "four.toml") << cluster;
  const Result planned = run("plan --profile " + (dir / "profile.json").string() + " --cluster " +
                             (dir / "four.toml").string() + " --global-batch 8 --schedules 2bw " +
                             "--out-ranked " + (dir / "ranked").string());
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  fs::path wide, recomputed;
  int plans = 0;
  for (const auto& file : fs::directory_iterator(dir / "ranked")) {
    std::ifstream in(file.path());
    const auto plan = nlohmann::json::parse(in);
    ++plans;
    EXPECT_EQ(plan["schedule"], "2bw") << file.path();
    const bool recomputes = plan["recompute"].get<bool>();
    if (!recomputes && plan["dp_width"] == 2 && plan["stages"] == 2 && wide.empty()) wide = file.path();
    if (recomputes && plan["stages"] == 2 && recomputed.empty()) recomputed = file.path();
  }
  EXPECT_GE(plans, 2);
  ASSERT_FALSE(wide.empty()) << planned.output;
  ASSERT_FALSE(recomputed.empty()) << planned.output;
  for (const auto& chosen : {wide, recomputed}) {
    const auto run_dir = dir / ("run_" + chosen.stem().string());
    const Result trained = run("train --plan " + chosen.string() + " --train.steps 3 --eval.every 0 "
                               "--eval.batches 1 --sample.tokens 0 --quiet --run-dir " + run_dir.string());
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    const auto summary = nlohmann::json::parse(std::ifstream(run_dir / "summary.json"));
    EXPECT_EQ(summary["stages"], 2);
    EXPECT_EQ(summary["schedule"], "2bw");
    EXPECT_EQ(summary["steps"], 3);
    EXPECT_TRUE(std::isfinite(summary["final_loss"].get<double>()));
    if (chosen == wide) {
      EXPECT_EQ(summary["dp_width"], 2);
    }
  }
  const Result shown =
      run("config " + (dir / ("run_" + recomputed.stem().string()) / "config.toml").string());
  EXPECT_NE(shown.output.find("recompute = \"all\""), std::string::npos) << shown.output;
  fs::remove_all(dir);
}

// `pipetrain profile` of a model whose first layer takes images (the CNN): every layer is timed
// and the input backward is measured from the second layer on (the data have no gradient). It
// used to stop at layer 0 with "element 0 of the input tensors does not require grad".
// The CNN's BatchNorm trains differently at each microbatch size: it is timed at the run's own
// (32 images in 8 microbatches: 4), and a plan from its profile keeps that size and the run
// config's model (no GPT shape for `train --plan` to set).
TEST(Cli, ProfileTimesAModelThatTakesImagesAtItsRunsMicrobatch) {
  const auto dir = temp_dir("profile_cnn");
  fs::create_directories(dir);
  const std::string cnn = "--model.kind cnn --model.d_model 2 --model.heads 1 --data.format fashion-mnist "
                          "--data.path " + pipetrain::testing::tiny_image_folder();
  const Result profiled = run("profile " + cnn + " --repeats 1 --out " + (dir / "profile.json").string());
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  EXPECT_NE(profiled.output.find("(6 layers at microbatch sizes 4)"), std::string::npos) << profiled.output;
  const auto profile = nlohmann::json::parse(std::ifstream(dir / "profile.json"));
  ASSERT_EQ(profile["layers"].size(), 6u) << profile.dump();  // stem, 4 blocks, head
  EXPECT_EQ(profile["shape"]["name"], "cnn");
  EXPECT_EQ(profile["fixed_microbatch"]["microbatch"], 4);
  // Each layer beside its analytic time on this machine's cluster (a CPU profile at one thread),
  // or on the devices `--cluster` names.
  EXPECT_NE(profiled.output.find("analytic costs of `plan --config` (cluster this-machine), microbatch 4:"),
            std::string::npos) << profiled.output;
  EXPECT_NE(profiled.output.find("\n| stem | "), std::string::npos) << profiled.output;
  EXPECT_NE(profiled.output.find("host reads: no layer's forward or backward reads a value on the host"),
            std::string::npos) << profiled.output;
  const Result on_gpus = run("profile " + cnn + " --repeats 1 --threads 2 --cluster hgx-h200-x2 --out " +
                             (dir / "on_gpus.json").string());
  ASSERT_EQ(on_gpus.exit_code, 0) << on_gpus.output;
  EXPECT_NE(on_gpus.output.find("(cluster hgx-h200-x2), microbatch 4:"), std::string::npos) << on_gpus.output;
  EXPECT_NE(on_gpus.output.find("\n| all layers | "), std::string::npos) << on_gpus.output;
  const Result two_threads = run("profile " + cnn + " --repeats 1 --threads 2 --out " + (dir / "t2.json").string());
  ASSERT_EQ(two_threads.exit_code, 0) << two_threads.output;
  EXPECT_NE(two_threads.output.find("profile: no comparison with the analytic costs: clusters/this-machine.toml "
                                    "models one CPU core a worker, this profile ran on cpu with 2 threads"),
            std::string::npos) << two_threads.output;
  EXPECT_EQ(two_threads.output.find("| all layers |"), std::string::npos) << two_threads.output;
  for (const auto& layer : profile["layers"]) {
    ASSERT_EQ(layer["by_microbatch"].size(), 1u) << layer.dump();
    const auto& timing = layer["by_microbatch"].at(0);
    EXPECT_EQ(timing["microbatch"], 4);
    EXPECT_GT(timing["forward_s"].get<double>(), 0) << layer.dump();
    EXPECT_GT(timing["backward_s"].get<double>(), 0) << layer.dump();
  }
  const Result planned = run("plan --profile " + (dir / "profile.json").string() +  // (on this-machine)
                             " --global-batch 32 --out " + (dir / "plan.json").string());
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_NE(planned.output.find("plan: the microbatch stays 4 samples, the run's: BatchNorm"), std::string::npos)
      << planned.output;
  EXPECT_NE(planned.output.find("model cnn ("), std::string::npos) << planned.output;
  const auto plan = nlohmann::json::parse(std::ifstream(dir / "plan.json"));
  EXPECT_EQ(plan["microbatch_size"], 4);
  EXPECT_EQ(plan["model"], "cnn");
  EXPECT_FALSE(plan.contains("model_shape")) << plan.dump();
  EXPECT_EQ(plan["model_layers"].size(), 6u);
  expect_one_line_error("profile " + cnn + " --microbatch-sizes 2,8 --out " + (dir / "other.json").string(),
                        "profile: --microbatch-sizes 2,8 leaves out the run's microbatch of 4 samples");
  expect_one_line_error("plan --profile " + (dir / "profile.json").string() + " --global-batch 30",
                        "plan: --global-batch 30 is not a multiple of the run's microbatch of 4 samples");
  // 64 devices: 6 layers make at most 6 stages, leaving more replicas than 8 microbatches.
  const Result no_split = run("plan --profile " + (dir / "profile.json").string() +
                              " --global-batch 32 --cluster p3-16xlarge-x8");
  EXPECT_EQ(no_split.exit_code, 2);
  EXPECT_NE(no_split.output.find("pipetrain: error: no plan splits a global batch of 32 over the 64 devices of "
                                 "cluster p3-16xlarge-x8 at microbatch size 4 (a pipeline has at most 6 stages"),
            std::string::npos) << no_split.output;
  fs::remove_all(dir);
}

// The planner chooses among 1F1B, ZB-H2 and ZB-V for the runtime by memory (analytic costs of the
// config's model on this machine's cluster description, so the ranking is deterministic): with
// memory for the zero-bubble schedules' extra activations and held weight-pass gradients (and
// ZB-V's worker 0 holding the embedding and the head's copy) it picks one of them, and that plan
// trains; with memory for 1F1B and not for them, 1F1B.
TEST(Cli, PlanPicksZeroBubbleWhereMemoryAllowsAnd1F1BWhereNotAndThePickTrains) {
  const auto dir = temp_dir("plan_zero_bubble");
  fs::create_directories(dir);
  std::ifstream machine(std::string(PIPETRAIN_SOURCE_DIR) + "/clusters/this-machine.toml");
  std::string cluster((std::istreambuf_iterator<char>(machine)), std::istreambuf_iterator<char>());
  cluster = std::regex_replace(cluster, std::regex("worker_overhead_gb = [0-9.]+"), "worker_overhead_gb = 0");
  const auto plan_with = [&](const std::string& memory_gb) {
    const std::string name = "cluster" + memory_gb + ".toml";
    std::ofstream(dir / name) << std::regex_replace(cluster, std::regex("device_memory_gb = [0-9.]+"),
                                                    "device_memory_gb = " + memory_gb);
    const auto out = dir / ("plan" + memory_gb + ".json");
    const Result planned = run("plan --config " + std::string(PIPETRAIN_SOURCE_DIR) +
                               "/examples/default.toml --model.layers 6 --model.d_model 192 "
                               "--model.seq_len 64 --model.vocab_size 2048 --global-batch 8 "
                               "--schedules 1f1b,zb-h2,zb-v --cluster " + (dir / name).string() +
                               " --out " + out.string());
    EXPECT_EQ(planned.exit_code, 0) << planned.output;
    return std::make_pair(out, nlohmann::json::parse(std::ifstream(out))["schedule"].get<std::string>());
  };
  EXPECT_EQ(plan_with("0.036").second, "1f1b");  // 34.3 MiB per worker
  const auto [roomy, pick] = plan_with("0.052");  // 49.6 MiB: not enough for data parallelism
  EXPECT_EQ(pick, "zb-h2") << pick;  // the analytic costs decide it, the same on every machine
  const auto run_dir = dir / "run";
  // The plan carries the model overrides given to `plan --config`.
  const Result trained = run("train " + std::string(PIPETRAIN_SOURCE_DIR) +
                             "/examples/default.toml --plan " + roomy.string() + " --train.steps 2 --eval.every 2 "
                             "--eval.batches 1 --sample.tokens 0 --quiet --run-dir " + run_dir.string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const auto summary = nlohmann::json::parse(std::ifstream(run_dir / "summary.json"));
  EXPECT_EQ(summary["schedule"], pick);
  EXPECT_EQ(summary["stages"], pick == "zb-v" ? 4 : 2);  // model stages: 2 workers x its chunks
  EXPECT_EQ(summary["steps"], 2);
  EXPECT_TRUE(std::isfinite(summary["final_val_loss"].get<double>()));
  fs::remove_all(dir);
}

// `pipetrain simulate` as a user runs it: the grid, the closed-form numbers, and both pictures.
TEST(Cli, SimulatePrintsTheGridAndWritesTraceAndSvg) {
  const auto dir = temp_dir("simulate");
  fs::create_directories(dir);
  const Result result = run("simulate --schedule 1f1b --stages 2 --microbatches 3 --svg " +
                            (dir / "t.svg").string() + " --trace " + (dir / "t.json").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("w0: 0F0 0F1 0B0 0F2 0B1 0B2"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("w1: 1F0 1B0 1F1 1B1 1F2 1B2"), std::string::npos) << result.output;
  // Default costs tf = 1, tb = 2 ms: (m + p - 1)(tf + tb) = 12 ms, bubble (p-1)/(m+p-1) = 25%.
  EXPECT_NE(result.output.find("iteration time   12.000 ms"), std::string::npos) << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '%'), 2) << result.output;
  EXPECT_NE(result.output.find("25.00%"), std::string::npos) << result.output;
  std::ifstream trace_file(dir / "t.json");
  const auto trace = nlohmann::json::parse(trace_file);
  int compute = 0;
  const std::regex compute_name("[0-9]+[FB][0-9]+");
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "X" && std::regex_match(event["name"].get<std::string>(), compute_name)) ++compute;
  }
  EXPECT_EQ(compute, 12);  // 2 workers x 3 microbatches x (F, B)
  std::stringstream svg;
  svg << std::ifstream(dir / "t.svg").rdbuf();
  EXPECT_EQ(svg.str().rfind("<svg", 0), 0u);
  EXPECT_NE(svg.str().find("</svg>"), std::string::npos);
  expect_one_line_error("simulate --schedule 2bw --stages 4 --microbatches 2", "m >= d");
  // A schedule that takes chunks is simulated at 2 unless told (interleaved at 1 is 1F1B; ZB-V
  // and DualPipeV refused 1).
  for (const std::string name : {"interleaved", "bfs", "zb-v", "dualpipev"}) {
    const Result chunked = run("simulate --schedule " + name + " --stages 2 --microbatches 4");
    ASSERT_EQ(chunked.exit_code, 0) << name << chunked.output;
    EXPECT_NE(chunked.output.find("schedule " + name + ": 2 workers x 2 chunk(s)"), std::string::npos) << chunked.output;
  }
  fs::remove_all(dir);
}

// The help texts and refusals list the schedules the catalogue says run, plan or simulate
// (`train --help` once listed only three of the nine the runtime runs).
TEST(Cli, HelpAndRefusalsNameTheCatalogueSchedules) {
  using pipetrain::schedule::ScheduleEntry;
  const std::string train_help = run("train --help").output;
  const std::string plan_help = run("plan --help").output;
  const std::string simulate_help = run("simulate --help").output;
  const std::string refusal = run("train --schedule zigzag").output;
  for (const ScheduleEntry& entry : pipetrain::schedule::schedule_catalogue()) {
    const std::string name = " " + entry.name + ",";  // one item of a list
    const std::string last = " " + entry.name + "\n";  // or its last
    const auto listed = [&](const std::string& text) {
      return text.find(name) != std::string::npos || text.find(last) != std::string::npos;
    };
    EXPECT_EQ(listed(train_help), entry.runtime.runs) << entry.name << "\n" << train_help;
    EXPECT_EQ(listed(refusal + "\n"), entry.runtime.runs) << entry.name << "\n" << refusal;
    EXPECT_NE(simulate_help.find(entry.name), std::string::npos) << entry.name;
    if (entry.planner.plans) {
      EXPECT_NE(plan_help.find(entry.name), std::string::npos) << entry.name;
    }
  }
  // Every schedule runs now; what a schedule takes is still checked by its entry.
  expect_one_line_error("train --stages 2 --schedule zb-h1 --pipeline.chunks 2",
                        "pipeline.chunks = 2 needs pipeline.schedule = \"interleaved\" or \"bfs\"");
}

// The default config with `overrides`: 3 steps, each logged, no evaluation or sample.
std::string three_logged_steps(const std::string& overrides) {
  return std::string(PIPETRAIN_SOURCE_DIR) + "/examples/default.toml " + overrides +
         " --train.steps 3 --eval.every 0 --eval.batches 1 --sample.tokens 0 --log.every 1";
}

// `plan --svg/--trace` draw the best plan's simulated timeline: one lane per pipeline worker,
// m forwards and m backwards on each.
TEST(Cli, PlanWritesTheBestPlansSimulatedTimeline) {
  const auto dir = temp_dir("plan_timeline");
  fs::create_directories(dir);
  const Result result = run("plan --model gpt-2.2b --cluster p3-16xlarge-x8 --global-batch 256 "
                            "--schedules 1f1b --top 1 --out " + (dir / "plan.json").string() +
                            " --trace " + (dir / "t.json").string() + " --svg " + (dir / "t.svg").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto plan = nlohmann::json::parse(std::ifstream(dir / "plan.json"));
  const int stages = plan["stages"], microbatches = plan["microbatches"];
  const auto trace = nlohmann::json::parse(std::ifstream(dir / "t.json"));
  std::map<int, int> compute_per_worker;
  for (const auto& event : trace["traceEvents"]) {
    const bool compute = event["cat"] == "Forward" || event["cat"] == "Backward";
    if (event["ph"] == "X" && compute) ++compute_per_worker[event["pid"].get<int>()];
  }
  ASSERT_EQ(int(compute_per_worker.size()), stages);
  for (const auto& [worker, count] : compute_per_worker) EXPECT_EQ(count, 2 * microbatches) << worker;
  std::stringstream svg;
  svg << std::ifstream(dir / "t.svg").rdbuf();
  EXPECT_NE(svg.str().find("predicted: 1f1b"), std::string::npos);
  fs::remove_all(dir);
}

// A plan of a model run here draws its predicted memory on the timeline, as a run's trace.json
// has it: every action's, rising and falling with the schedule, each worker's highest the plan's
// predicted tensors (its worker memory less the cluster's overhead).
TEST(Cli, PlanTimelineCarriesEachWorkersPredictedMemory) {
  const auto dir = temp_dir("plan_timeline_memory");
  fs::create_directories(dir);
  const Result result = run("plan --config " + three_logged_steps("--model.layers 4 --model.d_model 128") +
                            " --schedules zb-h1 --out " + (dir / "plan.json").string() + " --trace " +
                            (dir / "t.json").string() + " --svg " + (dir / "t.svg").string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const auto plan = nlohmann::json::parse(std::ifstream(dir / "plan.json"));
  const double overhead = plan["predicted_worker_overhead_bytes"].get<double>();
  std::map<int, std::pair<double, double>> lowest_and_highest;  // per worker, MiB
  const auto trace = nlohmann::json::parse(std::ifstream(dir / "t.json"));
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] != "X") continue;
    const double peak = event["args"]["memory_peak_mib"].get<double>();
    auto [it, fresh] = lowest_and_highest.try_emplace(event["pid"].get<int>(), peak, peak);
    it->second = {std::min(it->second.first, peak), std::max(it->second.second, peak)};
  }
  ASSERT_EQ(lowest_and_highest.size(), plan["stages"].get<size_t>());
  for (const auto& [worker, range] : lowest_and_highest) {
    const double predicted = (plan["predicted_worker_memory_bytes"][worker].get<double>() - overhead) / (1 << 20);
    EXPECT_NEAR(range.second, predicted, 1e-5) << worker;
    EXPECT_LT(range.first, 0.95 * range.second) << worker;
  }
  std::stringstream svg;
  svg << std::ifstream(dir / "t.svg").rdbuf();
  EXPECT_NE(svg.str().find("under each worker: its tensor memory"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace

namespace {

// The widths of the SVG boxes filled with a forward's colour (lightness 72%).
std::vector<double> forward_box_widths(const std::string& svg) {
  static const std::regex box(R"re(width="([0-9.]+)" height="26.0" fill="hsl\(\d+,70%,72%\))re");
  std::vector<double> widths;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), box); it != std::sregex_iterator();
       ++it)
    widths.push_back(std::stod((*it)[1]));
  return widths;
}

}  // namespace

TEST(Cli, PipelineTimelineDrawsAFewStepsReadably) {
  const auto dir = temp_dir("timeline");
  const Result result = run(
      "train --stages 2 --model.layers 2 --model.d_model 16 --model.heads 2 --model.seq_len 16 "
      "--train.batch_size 8 --train.microbatches 4 --train.steps 7 --train.threads 1 --log.every 1 "
      "--eval.every 0 --eval.batches 1 --sample.tokens 0 --quiet --run-dir " + dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  std::ifstream in(dir / "timeline.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(svg.find("steps 3-5 (of the 7 traced in trace.json)"), std::string::npos) << svg.substr(0, 600);
  // Steps 3-5 of 2 workers x 4 microbatches: 24 forwards drawn (the old picture drew all 56).
  std::vector<double> widths = forward_box_widths(svg);
  ASSERT_EQ(widths.size(), 24u);
  std::sort(widths.begin(), widths.end());
  const double width_px = std::stod(svg.substr(svg.find("width=\"") + 7));
  if (width_px < 4000) {
    EXPECT_GE(widths[widths.size() / 2], 31.9) << "median forward in px";
  }
  // trace.json keeps every traced step.
  const auto trace = nlohmann::json::parse(std::ifstream(dir / "trace.json"));
  size_t forwards = 0, counters = 0, actions = 0;
  std::map<std::pair<int, int>, double> action_peaks;  // (step, worker) -> highest action peak
  for (const auto& event : trace["traceEvents"]) {
    forwards += event.value("cat", "") == "Forward";
    counters += event["ph"] == "C";
    if (event["ph"] != "X") continue;
    ++actions;
    const auto& args = event["args"];
    EXPECT_GE(args["memory_peak_mib"].get<double>(), args["memory_live_mib"].get<double>());
    double& peak = action_peaks[{args["step"].get<int>(), event["pid"].get<int>()}];
    peak = std::max(peak, args["memory_peak_mib"].get<double>());
  }
  EXPECT_EQ(forwards, 7u * 2 * 4);
  EXPECT_EQ(counters, 2 * actions);  // each action's peak, then what it left live
  // The step's peak (metrics.jsonl) is its highest action's: the trace accounts for it.
  std::ifstream metrics(dir / "metrics.jsonl");
  int steps = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (!record.contains("mem_peak_mb")) continue;
    ++steps;
    for (int w = 0; w < 2; ++w) {
      const double step_peak = record["mem_peak_mb"][w].get<double>();
      EXPECT_DOUBLE_EQ(step_peak, (action_peaks[{record["step"].get<int>() - 1, w}])) << record["step"];
    }
  }
  EXPECT_EQ(steps, 7);
  EXPECT_NE(svg.find("under each worker: its tensor memory"), std::string::npos);
  // Each worker's memory line (summary.json) names its highest traced action.
  const auto summary = nlohmann::json::parse(std::ifstream(dir / "summary.json"));
  ASSERT_EQ(summary["memory"].size(), 2u);
  for (int w = 0; w < 2; ++w) {
    double highest = 0;
    for (const auto& [step_and_worker, peak] : action_peaks) {
      if (step_and_worker.second == w) highest = std::max(highest, peak);
    }
    const std::string line = summary["memory"][w];
    char expected[64];
    std::snprintf(expected, sizeof expected, "; traced peak %.1f MiB in %d", highest, w);
    EXPECT_NE(line.find(expected), std::string::npos) << line;
  }
  fs::remove_all(dir);
}

namespace {

// Every ranked plan of `pipetrain plan ARGS --out-ranked DIR`, best first.
std::vector<nlohmann::json> ranked_plans(const std::string& args, const fs::path& dir, std::string* output) {
  const Result result = run("plan " + args + " --top 3 --out-ranked " + dir.string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  *output = result.output;
  std::vector<fs::path> files;
  if (fs::exists(dir)) {
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().filename().string().rfind("rank-", 0) == 0) files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  std::vector<nlohmann::json> plans;
  for (const auto& file : files) plans.push_back(nlohmann::json::parse(std::ifstream(file)));
  return plans;
}

// The partitions of the ranked plans at `stages` stages (non-interleaved schedules).
// The partitions of the plans of `stages` stages with microbatches of at least `rows` samples.
std::set<std::vector<int>> partitions_at(const std::vector<nlohmann::json>& plans, int stages,
                                         int rows = 1) {
  std::set<std::vector<int>> found;
  for (const auto& plan : plans) {
    if (plan["stages"] == stages && plan["chunk_partition"].empty() && plan["microbatch_size"] >= rows) {
      found.insert(plan["partition"].get<std::vector<int>>());
    }
  }
  return found;
}

}  // namespace

// --out-ranked writes one ranking: an earlier one's rank files in the folder go first (they
// stayed, and bench/plan_choice.sh measured them too); other files stay.
TEST(Cli, PlanOutRankedHoldsOneRanking) {
  const auto dir = temp_dir("plan_ranked_again");
  fs::create_directories(dir);
  pipetrain::write_file_atomically((dir / "notes.txt").string(), "mine");
  ASSERT_EQ(run("plan --schedules 1f1b --top 1 --out-ranked " + dir.string()).exit_code, 0);
  std::string output;
  const auto plans = ranked_plans("--schedules gpipe", dir, &output);
  ASSERT_FALSE(plans.empty()) << output;
  for (const auto& plan : plans) EXPECT_EQ(plan["schedule"], "gpipe");
  EXPECT_EQ(pipetrain::read_file((dir / "notes.txt").string()), "mine");
  fs::remove_all(dir);
}

// A plan run at another depth (`--plan plan.json --stages N` after it): the plan's partition,
// cut for its own depth, gives way to a balanced one (it was refused: "must give N counts").
TEST(Cli, APlanRunAtAnotherDepthCutsItsOwnPartition) {
  const auto dir = temp_dir("plan_other_depth");
  fs::create_directories(dir);
  const std::string plan = (dir / "plan.json").string();
  ASSERT_EQ(run("plan --config " + std::string(PIPETRAIN_SOURCE_DIR) + "/examples/default.toml --schedules 1f1b "
                "--out " + plan).exit_code, 0);
  const int planned = nlohmann::json::parse(pipetrain::read_file(plan))["stages"].get<int>();
  const int other = planned == 2 ? 1 : 2;
  const Result trained = run("train --plan " + plan + " --stages " + std::to_string(other) +
                             " --train.steps 1 --eval.batches 1 --sample.tokens 0 --quiet --run-dir " + (dir / "run").string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string config = pipetrain::read_file((dir / "run" / "config.toml").string());
  EXPECT_NE(config.find("\nstages = " + std::to_string(other) + "\n"), std::string::npos) << config;
  // Not the plan's run: its predictions are not set beside this run's measurements.
  EXPECT_NE(trained.output.find("not compared, the run changed what it planned: "), std::string::npos)
      << trained.output;
  EXPECT_NE(trained.output.find("pipeline.stages " + std::to_string(other) + " (the plan's " +
                                std::to_string(planned) + ")"),
            std::string::npos) << trained.output;
  EXPECT_EQ(trained.output.find("step time"), std::string::npos) << trained.output;
  fs::remove_all(dir);
}

// A plan from a profile trains the model that was profiled: the profile's overrides (here its
// precision) go into the plan's config_fields and `train --plan` applies them; a run that
// changes one afterwards is not set beside the plan's predictions, and says which field.
TEST(Cli, APlanFromAProfileTrainsTheProfiledPrecision) {
  const auto dir = temp_dir("plan_profiled_dtype");
  fs::create_directories(dir);
  const std::string profile = (dir / "profile.json").string(), plan = (dir / "plan.json").string();
  const Result profiled = run("profile --model.layers 2 --model.d_model 16 --model.heads 2 --model.seq_len 16 "
                              "--model.dtype float64 --microbatch-sizes 1 --repeats 1 --out " + profile);
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  const Result planned = run("plan --profile " + profile + " --global-batch 2 --schedules 1f1b --out " + plan);
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_EQ(nlohmann::json::parse(pipetrain::read_file(plan))["config_fields"]["model.dtype"], "float64");
  const std::string steps = " --train.steps 1 --eval.batches 1 --sample.tokens 0 --quiet --run-dir ";
  const Result trained = run("train --plan " + plan + steps + (dir / "run").string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(pipetrain::read_file((dir / "run" / "config.toml").string()).find("dtype = \"float64\""),
            std::string::npos);
  EXPECT_EQ(trained.output.find("the run changed what it planned"), std::string::npos) << trained.output;
  const Result changed = run("train --plan " + plan + " --model.dtype float32" + steps + (dir / "changed").string());
  ASSERT_EQ(changed.exit_code, 0) << changed.output;
  EXPECT_NE(changed.output.find("not compared, the run changed what it planned: model.dtype \"float32\" (the "
                                "plan's \"float64\")"), std::string::npos) << changed.output;
  fs::remove_all(dir);
}

// `plan --config` plans the run's own model from its own per-layer costs (Model::layer_work):
// the CNN's [stem, 28x28 block, 14x14 block, 7x7 block, head] is cut where its costs say (the
// full-resolution block is the heaviest, the stem and head near free), not as GPT's
// [embedding, equal blocks, heavy head] would be.
TEST(Cli, PlanConfigPlansTheCnnFromItsOwnLayerCosts) {
  const auto dir = temp_dir("plan_cnn");
  std::string output;
  const auto plans = ranked_plans("--config " + std::string(PIPETRAIN_SOURCE_DIR) +
                                  "/examples/fashion_mnist.toml", dir / "two", &output);
  ASSERT_FALSE(plans.empty()) << output;
  EXPECT_NE(output.find("model cnn (0.04M parameters)"), std::string::npos) << output;  // from its layers
  EXPECT_NE(output.find("cluster this-machine"), std::string::npos) << output;
  EXPECT_NE(output.find("global batch 80"), std::string::npos) << output;  // train.batch_size
  EXPECT_EQ(plans.front()["model"], "cnn");
  EXPECT_FALSE(plans.front().contains("model_shape"));  // no GPT shape for a CNN
  EXPECT_EQ(plans.front()["model_layers"].size(), 5u);
  // 2 stages: [stem, 28x28 block] | [14x14 block, 7x7 block, head]. GPT's costs for 5 layers
  // (near-free embedding, equal blocks, heavier head) would cut 3 | 2.
  EXPECT_EQ(partitions_at(plans, 2), (std::set<std::vector<int>>{{2, 3}})) << output;
  // BatchNorm normalises over a microbatch: every plan keeps the example's 40 images (80 in 2
  // microbatches), as another size would train another model.
  EXPECT_NE(output.find("plan: the microbatch stays 40 samples, the run's: BatchNorm"), std::string::npos) << output;
  for (const auto& plan : plans) EXPECT_EQ(plan["microbatch_size"], 40) << plan.dump();
  expect_one_line_error("plan --config " + std::string(PIPETRAIN_SOURCE_DIR) +
                            "/examples/fashion_mnist.toml --global-batch 100",
                        "plan: --global-batch 100 is not a multiple of the run's microbatch of 40 samples");

  // 3 devices: the heaviest block (28x28) alone with the near-free stem, then each other block.
  std::ifstream this_machine(std::string(PIPETRAIN_SOURCE_DIR) + "/clusters/this-machine.toml");
  std::stringstream text;
  text << this_machine.rdbuf();
  std::string three = std::regex_replace(text.str(), std::regex("devices_per_node = 2"), "devices_per_node = 3");
  three = std::regex_replace(three, std::regex("name = \"this-machine\""), "name = \"three-cores\"");
  fs::create_directories(dir);
  std::ofstream(dir / "three.toml") << three;
  const auto plans3 = ranked_plans("--config " + std::string(PIPETRAIN_SOURCE_DIR) +
                                   "/examples/fashion_mnist.toml --cluster " + (dir / "three.toml").string() +
                                   " --global-batch 120", dir / "three", &output);
  ASSERT_FALSE(plans3.empty()) << output;
  EXPECT_EQ(partitions_at(plans3, 3), (std::set<std::vector<int>>{{2, 1, 2}})) << output;
  fs::remove_all(dir);
}

// A GPT run config plans the same way (its layers' own costs), with overrides after --config.
// A per-worker memory budget: GPT-2 small (124M) does not fit 2 GiB in one process (weights,
// gradients and AdamW's state alone are 16 bytes x 124M), so the best plan pipelines it over
// several workers, each predicted under the budget; a budget no plan fits names the least one.
TEST(Cli, PlanMemoryPerWorkerPipelinesGpt2SmallUnderTheBudget) {
  const auto dir = temp_dir("plan_budget");
  fs::create_directories(dir);
  const std::string config = "--config " + std::string(PIPETRAIN_SOURCE_DIR) + "/examples/default.toml "
                             "--model.preset gpt2-small --train.batch_size 4 --train.microbatches 4";
  const Result planned = run("plan " + config + " --memory-per-worker 2GiB --out " + (dir / "plan.json").string());
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  const auto plan = nlohmann::json::parse(std::ifstream(dir / "plan.json"));
  EXPECT_GE(plan["stages"].get<int>() * plan["dp_width"].get<int>(), 2) << planned.output;
  const double budget = 2.0 * 1024 * 1024 * 1024;
  ASSERT_EQ(plan["predicted_worker_memory_bytes"].size(), plan["stages"].get<size_t>());
  for (const auto& worker : plan["predicted_worker_memory_bytes"]) {
    EXPECT_LE(worker.get<double>(), budget);
    EXPECT_GT(worker.get<double>(), 0.25 * budget);  // 124M parameters over a few workers
  }
  // One process needs its 16 bytes per parameter and more: listed among the misfits.
  EXPECT_NE(planned.output.find("| data parallel | 1 | 1 |"), std::string::npos) << planned.output;
  expect_one_line_error("plan " + config + " --memory-per-worker 100MB", "the smallest plan needs");
  expect_one_line_error("plan " + config + " --memory-per-worker lots", "expected a size like 2GiB");
  expect_one_line_error("plan --memory-per-worker 2GiB", "give --config RUN.toml");
  fs::remove_all(dir);
}

// Each worker's predicted tensors (the plan's predicted_worker_memory_bytes less the cluster's
// worker overhead) and its counted peak over the run, in MiB, for the best 2-stage pipeline plan
// of `schedule` with or without recomputation (worker w holds stage w).
namespace {
struct WorkerMemory {
  double predicted = 0, measured = 0;
};
// The first ranked plan of `schedule` on 2 stages x `replicas`, trained: per rank (replica-major).
std::vector<WorkerMemory> planned_and_measured(const fs::path& dir, const std::string& config,
                                               const std::string& schedule, bool recompute,
                                               int replicas = 1) {
  const std::string name = schedule + (recompute ? "-recompute" : "") + (replicas > 1 ? "-replicas" : "");
  const std::string workers_allowed = replicas > 1 ? " --memory-per-worker 4GiB --max-workers 4" : "";
  std::string output;
  fs::path plan_path;
  for (const auto& ranked : ranked_plans("--config " + config + " --schedules " + schedule + workers_allowed,
                                         dir / name, &output)) {
    if (ranked["stages"] == 2 && ranked["dp_width"] == replicas && ranked["recompute"].get<bool>() == recompute) {
      plan_path = dir / (name + ".json");
      std::ofstream(plan_path) << ranked.dump();
      break;
    }
  }
  EXPECT_FALSE(plan_path.empty()) << output;
  if (plan_path.empty()) return {};
  const auto plan = nlohmann::json::parse(std::ifstream(plan_path));
  const Result trained = run("train " + config + " --plan " + plan_path.string() + " --run-dir " +
                             (dir / (name + "-run")).string() + " --overwrite --quiet");
  EXPECT_EQ(trained.exit_code, 0) << trained.output;
  const size_t stages = plan["stages"].get<size_t>();
  std::vector<WorkerMemory> workers(stages * size_t(replicas));
  std::ifstream metrics(dir / (name + "-run") / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (!record.contains("mem_peak_mb")) continue;
    for (size_t w = 0; w < workers.size(); ++w) {
      workers[w].measured = std::max(workers[w].measured, record["mem_peak_mb"][w].get<double>());
    }
  }
  const double overhead_mib = plan["predicted_worker_overhead_bytes"].get<double>() / (1 << 20);
  EXPECT_GT(overhead_mib, 0);  // clusters/this-machine.toml's worker_overhead_gb
  for (size_t w = 0; w < workers.size(); ++w) {
    workers[w].predicted = plan["predicted_worker_memory_bytes"][w % stages].get<double>() / (1 << 20) - overhead_mib;
  }
  // The run says how the plan held (cli/plan_check.h) and keeps the plan beside it.
  EXPECT_NE(trained.output.find("against the plan (" + plan_path.string() + "): step time"), std::string::npos)
      << trained.output;
  for (size_t w = 0; w < workers.size(); ++w) {
    char line[160];
    const std::string who = replicas > 1 ? "rank " + std::to_string(w) + " (replica " + std::to_string(w / stages) +
                                               " worker " + std::to_string(w % stages) + ")"
                                         : "worker " + std::to_string(w);
    std::snprintf(line, sizeof line, "  %s: tensors peaked at %.1f MiB, %.1f MiB predicted", who.c_str(),
                  workers[w].measured, workers[w].predicted);
    EXPECT_NE(trained.output.find(line), std::string::npos) << line << "\n" << trained.output;
  }
  EXPECT_TRUE(fs::exists(dir / (name + "-run") / "plan.json"));
  return workers;
}
}  // namespace

// The planner's memory model of a run against the run: each worker within 2.5% of its counted
// peak (measured: 0.3-0.9% under), for a flushing and a no-flush schedule (the optimizer step's
// temporaries fall with nothing in flight in 1F1B and on top of the held activations in 2BW,
// beside the second set of gradients 2BW's pending update holds), and for zero-bubble's split
// backward (ZB-H1, ZB-H2, ZB-V) with full logits and chunked cross-entropy (measured 0.0-0.8%
// under). There B's peak holds what it records (with full logits, the head's logits gradient), a
// later W makes weight gradients only, and the gradients a worker sent stay until a receive shows
// they arrived: with chunked cross-entropy the head's stage is the head alone, whose W tail holds
// two (3.2% under before they were counted and the sent input gradient was let go). (Charged the
// stage's workspace on top of what they record, B and W stood 14% high on ZB-H1's last worker
// with full logits, 4-5% with chunked cross-entropy.)
TEST(Cli, PlannedWorkerMemoryMatchesTheRunsCountedPeaks) {
  const auto dir = temp_dir("plan_memory");
  fs::create_directories(dir);
  const std::string config = three_logged_steps(
      "--model.layers 4 --model.d_model 128 --model.heads 4 --model.vocab_size 4096 "
      "--train.batch_size 8 --train.microbatches 4");
  const std::vector<std::pair<std::string, std::string>> runs{
      {"1f1b", ""}, {"2bw", ""}, {"zb-h1", ""}, {"zb-h1", " --model.loss_chunk_tokens 64"},
      {"zb-h2", ""}, {"zb-h2", " --model.loss_chunk_tokens 64"},
      {"zb-v", ""}, {"zb-v", " --model.loss_chunk_tokens 64"}};
  for (const auto& [schedule, loss] : runs) {
    const auto workers = planned_and_measured(dir, config + loss, schedule, false);
    ASSERT_EQ(workers.size(), 2u) << schedule << loss;
    for (size_t w = 0; w < workers.size(); ++w) {
      EXPECT_NEAR(workers[w].predicted, workers[w].measured, 0.025 * workers[w].measured)
          << schedule << loss << " worker " << w;
    }
  }
  fs::remove_all(dir);
}

// With 2 replicas of 2 stages each stage's replica sum copies its gradients into one flat buffer:
// on this wide model with 8 tokens a microbatch (gradients 7 MiB a stage, activations under
// 1 MiB) GPipe's, 1F1B's and ZB-V's workers peak there, each within 2.5% (measured 0.0-0.1%;
// 20% under before the buffer was counted; ZB-V's first worker also measured 9% above the model
// on one replica only: Gloo's thread had kept the buffer an action longer, runtime/replica_sums.h,
// which now lets it go itself). Not 2BW: it lands its sums in a helper thread once the other
// replica's arrive, so what they meet depends on timing (49.1-54.8 MiB measured on one plan, a
// busy machine's the highest; docs/planning.md).
TEST(Cli, PlannedReplicatedWorkerMemoryCountsTheReplicaSums) {
  const auto dir = temp_dir("plan_replica_memory");
  fs::create_directories(dir);
  const std::string config = three_logged_steps(
      "--model.layers 2 --model.d_model 256 --model.heads 4 --model.vocab_size 4096 --model.seq_len 8 "
      "--train.batch_size 12 --train.microbatches 3");
  for (const std::string schedule : {"gpipe", "1f1b", "zb-v"}) {
    const auto ranks = planned_and_measured(dir, config, schedule, false, 2);
    ASSERT_EQ(ranks.size(), 4u) << schedule;
    for (size_t r = 0; r < ranks.size(); ++r) {
      EXPECT_NEAR(ranks[r].predicted, ranks[r].measured, 0.025 * ranks[r].measured) << schedule << " rank " << r;
    }
  }
  fs::remove_all(dir);
}

// A worker whose memory is mostly a large token embedding (16384 x 32: its weights, gradient,
// AdamW state and the update's temporaries; the tied head's copy on the other worker), under
// GPipe with 6 microbatches (an odd 3 per step at 2 sequences, or 6 of one), with and without
// recomputation, 1F1B and 2BW: every worker within 2.5% (measured 0.03-0.3% under). The
// embedding's backward workspace (its dense gradient, 2 MiB here) meets only the embedding's own
// activations of its microbatch: the blocks' are freed by then. GPipe's head worker peaks in the
// step's first backward, with all 6 microbatches' logits held and none of its gradients made yet
// (a step starts with them set to none): the simulator places the gradients from each stage's
// first backward on. 2BW's workers hold a second set of gradients, the pending update's.
// (Before these were modelled, GPipe's head worker stood 5.2% high and 2BW's workers 10-15%; the
// global norm's float64 copy of the embedding's gradient, 4 MiB, and the sends' tensors held for
// up to two steps hid part of it.)
TEST(Cli, PlannedEmbeddingWorkerMemoryMatchesTheRunsCountedPeaks) {
  const auto dir = temp_dir("plan_embedding_memory");
  fs::create_directories(dir);
  const std::string config = three_logged_steps(
      "--model.layers 2 --model.d_model 32 --model.heads 2 --model.vocab_size 16384 --model.seq_len 64 "
      "--train.batch_size 6 --train.microbatches 3");
  const std::vector<std::pair<std::string, bool>> runs{
      {"gpipe", false}, {"gpipe", true}, {"1f1b", false}, {"2bw", false}};
  for (const auto& [schedule, recompute] : runs) {
    const auto workers = planned_and_measured(dir, config, schedule, recompute);
    ASSERT_EQ(workers.size(), 2u) << schedule;
    const std::string name = schedule + (recompute ? " recompute" : "");
    for (size_t w = 0; w < workers.size(); ++w) {
      EXPECT_NEAR(workers[w].predicted, workers[w].measured, 0.025 * workers[w].measured)
          << name << " worker " << w;
    }
  }
  fs::remove_all(dir);
}

// Chunked cross-entropy's forward keeps more (a chunk's logits and log-sum-exp's copy, 8 MiB
// here) than its backward (the chunk's logits and the head weight's gradient): GPipe's head
// worker peaks in its backwards, beside the gradients, with the backward's own workspace
// (LayerWork::backward_workspace_values). With the forward's, it was predicted 14% high.
TEST(Cli, PlannedChunkedHeadWorkerHoldsItsBackwardsOwnWorkspace) {
  const auto dir = temp_dir("plan_chunked_head_memory");
  fs::create_directories(dir);
  const std::string config = three_logged_steps(
      "--model.layers 2 --model.d_model 32 --model.heads 2 --model.vocab_size 16384 --model.seq_len 64 "
      "--train.batch_size 6 --train.microbatches 3 --model.loss_chunk_tokens 1024");
  for (const std::string schedule : {"gpipe", "1f1b"}) {
    const auto workers = planned_and_measured(dir, config, schedule, false);
    ASSERT_EQ(workers.size(), 2u) << schedule;
    for (size_t w = 0; w < workers.size(); ++w) {
      EXPECT_NEAR(workers[w].predicted, workers[w].measured, 0.025 * workers[w].measured)
          << schedule << " worker " << w;
    }
  }
  fs::remove_all(dir);
}

TEST(Cli, PlanConfigPlansAGptRunConfigWithOverrides) {
  const auto dir = temp_dir("plan_gpt_config");
  std::string output;
  const auto plans = ranked_plans("--config " + std::string(PIPETRAIN_SOURCE_DIR) +
                                  "/examples/default.toml --model.layers 6", dir, &output);
  ASSERT_FALSE(plans.empty()) << output;
  EXPECT_EQ(plans.front()["model"], "gpt");
  EXPECT_EQ(plans.front()["model_layers"].size(), 8u);  // embedding, 6 blocks, head
  EXPECT_EQ(plans.front()["global_batch"], 32);
  // Equal blocks, a near-free embedding and a light head (vocabulary 256): 4 | 4.
  EXPECT_EQ(partitions_at(plans, 2), (std::set<std::vector<int>>{{4, 4}})) << output;
  // The run's AdamW: 2BW (whose catalogue recipe is Muon) is left out and said so; with Muon,
  // or asked for by --schedules, it is planned.
  const auto count_2bw = [](const std::vector<nlohmann::json>& ranked) {
    return std::count_if(ranked.begin(), ranked.end(), [](const auto& plan) { return plan["schedule"] == "2bw"; });
  };
  EXPECT_NE(output.find("plan: 2bw left out: it trains well with train.optimizer muon, this run's is adamw"),
            std::string::npos) << output;
  EXPECT_EQ(count_2bw(plans), 0);
  const std::string config = "--config " + std::string(PIPETRAIN_SOURCE_DIR) + "/examples/default.toml --model.layers 6";
  for (const std::string& asked : {config + " --train.optimizer muon --schedules 2bw", config + " --schedules 2bw"}) {
    const auto with_2bw = ranked_plans(asked, dir / "with_2bw", &output);
    EXPECT_GT(count_2bw(with_2bw), 0) << asked << "\n" << output;
    EXPECT_EQ(output.find("left out"), std::string::npos) << output;
  }
  const auto muon = ranked_plans(config + " --train.optimizer muon", dir / "muon", &output);
  EXPECT_EQ(output.find("left out"), std::string::npos) << output;
  fs::remove_all(dir);
  expect_one_line_error("plan --config " + std::string(PIPETRAIN_SOURCE_DIR) +
                        "/examples/default.toml --model gpt-355m", "without --model");
  expect_one_line_error("plan --model.layers 6", "need --config");
}

// A `--config` plan times memory-bound work at the cluster's memory bandwidth when it gives one
// (an H200's 4.8 TB/s; before, one CPU core's scaled by the GPU's compute rate: 111 TB/s). The
// same cluster with a tenth of it predicts a slower step.
TEST(Cli, PlanConfigTimesMemoryAtTheClustersBandwidth) {
  const auto dir = temp_dir("plan_memory_bandwidth");
  fs::create_directories(dir);
  std::stringstream text;
  text << std::ifstream(std::string(PIPETRAIN_SOURCE_DIR) + "/clusters/hgx-h200-x2.toml").rdbuf();
  const std::string cluster = text.str();
  ASSERT_NE(cluster.find("memory_bandwidth_gb_s = 4800"), std::string::npos);
  std::ofstream(dir / "fast.toml") << cluster;
  std::string slow = cluster;
  slow.replace(slow.find("4800"), 4, "480");
  std::ofstream(dir / "slow.toml") << slow;
  const auto step_s = [&](const std::string& file) {
    const Result result = run("plan --config " + three_logged_steps("--model.dtype bfloat16") + " --cluster " +
                              (dir / file).string() + " --schedules 1f1b --out " + (dir / "p.json").string());
    EXPECT_EQ(result.exit_code, 0) << result.output;
    return nlohmann::json::parse(std::ifstream(dir / "p.json"))["predicted_iteration_s"].get<double>();
  };
  EXPECT_GT(step_s("slow.toml"), 1.05 * step_s("fast.toml"));
  fs::remove_all(dir);
}
