// log.profile_step: the profiler's table counts what ran, its trace is a Chrome trace, and a run
// writes one pair of files per worker for exactly the steps asked for.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "../pipetrain_run.h"
#include "device/step_profiler.h"

namespace fs = std::filesystem;
using pipetrain::device::StepProfiler;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The calls-per-step column of the table row naming `op` exactly (-1 if none).
double calls_per_step(const std::string& table, const std::string& op) {
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string ms, share, calls, name;
    if (fields >> ms >> share >> calls >> name && name == op && !(fields >> name)) return std::stod(calls);
  }
  return -1;
}

}  // namespace

TEST(StepProfiler, TableCountsTheOperatorsPerStepAndTheTraceNamesThem) {
  const fs::path dir = pipetrain::testing::fresh_dir("step_profiler");
  fs::create_directories(dir);
  const auto a = torch::ones({64, 64}, torch::kDouble);
  StepProfiler profiler;
  profiler.start();
  EXPECT_TRUE(profiler.running());
  for (int i = 0; i < 6; ++i) (void)torch::mm(a, a);  // "two steps" of three products each
  const std::string table = profiler.stop_and_write((dir / "rank0").string(), 2);
  EXPECT_FALSE(profiler.running());
  EXPECT_EQ(table, read_text(dir / "rank0.txt"));
  EXPECT_EQ(table.rfind("2 step(s) profiled: ", 0), 0u) << table;
  EXPECT_EQ(calls_per_step(table, "aten::mm"), 3.0) << table;
  // The products are the host's only operators (their own sub-operators are inside them).
  EXPECT_NE(table.find("\nHost: 3 operators a step at top level"), std::string::npos) << table;
  const auto trace = nlohmann::json::parse(read_text(dir / "rank0.trace.json"));
  int products = 0;
  for (const auto& event : trace.at("traceEvents")) products += event.value("name", "") == "aten::mm";
  EXPECT_EQ(products, 6);
  fs::remove_all(dir);
}

namespace {

// A 4-step run of a tiny GPT on `stages` workers with log.profile_step `first` and
// log.profile_steps `count`; its output.
pipetrain::testing::ProcessResult profiled_run(const fs::path& dir, int stages, int first, int count) {
  return pipetrain::testing::run_pipetrain(fmt::format(
      "train --quiet --pipeline.stages {} --model.layers 2 --model.d_model 16 --model.heads 2 "
      "--model.seq_len 16 --train.batch_size 4 --train.microbatches 2 --train.steps 4 "
      "--train.threads 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 --log.profile_step {} "
      "--log.profile_steps {} --run-dir {}", stages, first, count, dir.string()));
}

}  // namespace

TEST(StepProfiler, ARunProfilesTheAskedStepsOnEveryWorker) {
  const fs::path dir = pipetrain::testing::fresh_dir("profiled_run");
  const auto result = profiled_run(dir, 2, 2, 2);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("steps 2-3 profiled"), std::string::npos) << result.output;
  for (const char* rank : {"rank0", "rank1"}) {
    const std::string table = read_text(dir / "profile" / (std::string(rank) + ".txt"));
    EXPECT_EQ(table.rfind("2 step(s) profiled: ", 0), 0u) << rank << ": " << table;
    EXPECT_GT(calls_per_step(table, "aten::mm"), 0) << rank << ": " << table;
    EXPECT_TRUE(nlohmann::json::parse(read_text(dir / "profile" / (std::string(rank) + ".trace.json")))
                    .contains("traceEvents"));
  }
  fs::remove_all(dir);
}

// A range past the run's end profiles the steps that exist and still writes its files.
TEST(StepProfiler, ARangePastTheEndProfilesTheLastSteps) {
  const fs::path dir = pipetrain::testing::fresh_dir("profiled_tail");
  const auto result = profiled_run(dir, 1, 3, 5);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("steps 3-4 profiled"), std::string::npos) << result.output;
  const std::string table = read_text(dir / "profile" / "rank0.txt");
  EXPECT_EQ(table.rfind("2 step(s) profiled: ", 0), 0u) << table;
  fs::remove_all(dir);
}
