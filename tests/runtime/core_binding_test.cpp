// pipeline.bind_cores: the workers the launcher spawns each run on their own block of the cores
// the run may use. Each worker reports its CPU affinity as it ran (summary.json "cores"), so
// these check what the processes got, not what the launcher meant. The runs go under
// `taskset` on the first two (or one) of the test's own cores, so the expected blocks do not
// depend on the machine's size.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/machine.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kTwoStages =
    "train --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
    "--train.batch_size 4 --train.microbatches 2 --train.steps 2 --eval.every 0 --eval.batches 1 "
    "--sample.tokens 0 --checkpoint.every 0 --stages 2";

struct BoundRun {
  std::string output;
  std::vector<std::string> cores;  // by rank
};

// Runs `args` restricted to `cores` and reads what each worker reported.
BoundRun run_on(const std::vector<int>& cores, const std::string& args, const std::string& name) {
  const fs::path dir = testing::fresh_dir(name);
  std::string list;
  for (const int core : cores) list += (list.empty() ? "" : ",") + std::to_string(core);
  const auto result = testing::run_program("taskset -c " + list + " " + PIPETRAIN_BINARY_DIR +
                                               std::string("/pipetrain"),
                                           args + " --run-dir " + dir.string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  BoundRun run{result.output, {}};
  if (fs::exists(dir / "summary.json")) {
    const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
    run.cores = summary.at("cores").get<std::vector<std::string>>();
  }
  fs::remove_all(dir);
  return run;
}

TEST(CoreBinding, EachWorkerRunsOnItsOwnCore) {
  const auto allowed = allowed_cores();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 cores";
  const int a = allowed[0], b = allowed[1];
  const BoundRun run = run_on({a, b}, kTwoStages, "bind_on");
  EXPECT_EQ(run.cores, (std::vector<std::string>{std::to_string(a), std::to_string(b)}));
  // A bound worker's default is one compute thread per core of its own.
  EXPECT_NE(run.output.find(fmt::format("1 thread(s) per worker on cores {} | {}", a, b)),
            std::string::npos) << run.output;
}

TEST(CoreBinding, OffLeavesEveryWorkerOnEveryCore) {
  const auto allowed = allowed_cores();
  if (allowed.size() < 2) GTEST_SKIP() << "needs 2 cores";
  const std::vector<int> both = {allowed[0], allowed[1]};
  const BoundRun run = run_on(both, kTwoStages + " --pipeline.bind_cores 0", "bind_off");
  EXPECT_EQ(run.cores, std::vector<std::string>(2, describe_cores(both)));
  EXPECT_EQ(run.output.find("on cores"), std::string::npos) << run.output;
}

TEST(CoreBinding, NoBindingWhenWorkersWouldShareACore) {
  const int only = allowed_cores().front();
  const BoundRun run = run_on({only}, kTwoStages, "bind_shared");
  EXPECT_EQ(run.cores, std::vector<std::string>(2, std::to_string(only)));
  EXPECT_NE(run.output.find("not bound to cores"), std::string::npos) << run.output;
}

}  // namespace
}  // namespace pipetrain
