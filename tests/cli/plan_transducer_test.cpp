// `pipetrain plan --config` knows the transducer's last-stage joint memory per loss method
// (TransducerModel::layer_work): the batched loss holds the microbatch's whole joint activation,
// the sample-wise loss one utterance's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// Predicted tensor bytes (less the cluster's worker overhead) per worker of the 2-stage GPipe plan with one microbatch of `rows` (no
// recomputation) for examples/speech.toml at bench/transducer_pipeline_memory.sh's shape, with
// two encoder blocks: both losses' plans then cut [3 | 1], the joint alone on the last worker
// (with three, the sample-wise joint's shorter time lets encoder2 join it).
std::vector<double> two_stage_worker_memory(const std::string& loss, int rows) {
  const fs::path dir = testing::fresh_dir("plan_transducer_" + loss);
  const std::string batch = std::to_string(rows);
  const auto result = testing::run_pipetrain(
      "plan --config " + std::string(PIPETRAIN_SOURCE_DIR) + "/examples/speech.toml "
      "--model.layers 2 --model.seq_len 800 --model.max_labels 160 --model.transducer_loss " + loss +
      " --train.batch_size " + batch + " --train.microbatches 1 --global-batch " + batch +
      " --schedules gpipe --top 1 --out-ranked " + dir.string());
  EXPECT_EQ(result.exit_code, 0) << result.output;
  std::vector<double> memory;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const auto plan = nlohmann::json::parse(std::ifstream(entry.path()));
    if (plan["stages"] == 2 && plan["microbatch_size"] == rows && !plan["recompute"].get<bool>()) {
      memory = plan["predicted_worker_memory_bytes"].get<std::vector<double>>();
      for (double& worker : memory) worker -= plan["predicted_worker_overhead_bytes"].get<double>();
    }
  }
  fs::remove_all(dir);
  EXPECT_EQ(memory.size(), 2u) << result.output;
  return memory;
}

// 32 utterances of 200 encoder frames and 160 labels: the batched joint's tanh activation is
// [32, 200, 161, 128] float32. At its peak the batched last stage holds it and, in its backward,
// two gradients of its size (less the sample-wise loss's one utterance and kept gradients):
// 2.88 times it more than the sample-wise last stage. The first stage does not see the loss.
TEST(PlanTransducer, BatchedJointCostsTheLastWorkerAboutThreeJointActivations) {
  const auto sample_wise = two_stage_worker_memory("sample-wise", 32);
  const auto batched = two_stage_worker_memory("batched", 32);
  ASSERT_EQ(sample_wise.size(), 2u);
  ASSERT_EQ(batched.size(), 2u);
  EXPECT_EQ(batched[0], sample_wise[0]);
  const double joint_activation = 32.0 * 200 * 161 * 128 * 4;
  const double difference = batched[1] - sample_wise[1];
  EXPECT_GT(difference, 2.8 * joint_activation);
  EXPECT_LT(difference, 3.0 * joint_activation);
  EXPECT_GT(batched[1], 12 * sample_wise[1]);  // 13.8 times its tensors
}

}  // namespace
}  // namespace pipetrain
