// Two launchers joined as two "nodes" (--nnodes 2 --node-rank 0/1, fixed rendezvous port) on
// this machine, each with its own run folder as on machines without a shared file system: the
// job trains exactly like the same pipeline launched from one node.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "io/metrics.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

const std::string kJob =
    "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
    "--train.batch_size 8 --train.threads 1 --train.steps 3 --eval.every 0 --eval.batches 1 "
    "--log.every 1 --sample.tokens 0 --pipeline.timeout_s 60 --stages 2 --dp-width 2 "
    "--microbatches 2";

std::vector<double> losses(const fs::path& dir) {
  std::vector<double> out;
  for (const auto& record : read_metrics((dir / "metrics.jsonl").string())) {
    out.push_back(record["loss"].get<double>());
  }
  return out;
}

TEST(PipelineMultiNode, TwoNodesTrainLikeOne) {
  const auto single = testing::fresh_dir("one_node");
  const auto one = testing::run_pipetrain(kJob + " --run-dir " + single.string());
  ASSERT_EQ(one.exit_code, 0) << one.output;

  const auto node0 = testing::fresh_dir("node0"), node1 = testing::fresh_dir("node1");
  const std::string nodes = fmt::format(" --nnodes 2 --master-addr 127.0.0.1 --master-port {}",
                                        testing::free_port());
  const std::string binary = std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain ";
  // Node 1 (ranks 2, 3: replica 1) in the background, node 0 (ranks 0, 1: replica 0, with the
  // reporting last stage) in the foreground.
  const std::string node1_command = "timeout 300 " + binary + kJob + nodes +
                                    " --node-rank 1 --run-dir " + node1.string() + " >/dev/null 2>&1";
  const auto run = testing::run_pipetrain(kJob + nodes + " --node-rank 0 --run-dir " + node0.string(),
                                          "(" + node1_command + " &);");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(losses(node0), losses(single));
  EXPECT_EQ(losses(node0).size(), 3u);
  EXPECT_TRUE(fs::exists(node0 / "config.toml"));
  EXPECT_FALSE(fs::exists(node1 / "config.toml"));  // node 0 writes the run's config
  for (const auto& dir : {single, node0, node1}) fs::remove_all(dir);
}

TEST(PipelineMultiNode, BadNodeSettingsAreOneLine) {
  const auto dir = testing::fresh_dir("bad_nodes");
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {" --nnodes 3", "pipeline.nnodes 3 must divide the 4 workers"},
           {" --nnodes 2 --node-rank 2 --master-port 29999", "pipeline.node_rank 2 outside 0..1"},
           {" --nnodes 2 --node-rank 1", "several nodes need a fixed rendezvous port"}}) {
    const auto run = testing::run_pipetrain(kJob + args + " --run-dir " + dir.string());
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.output;
    EXPECT_EQ(run.output.rfind("pipetrain: error: " + message, 0), 0u) << args << "\n" << run.output;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
