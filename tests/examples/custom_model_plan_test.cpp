// `plan --config` on the custom example's residual MLP plans it from its own per-layer costs
// (MlpModel::layer_work), through the program that registers it (custom_model_trainer).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// Width 512, 3 blocks: [input 8x512, 3 blocks of two 512x512, head 512x4]. The blocks hold
// nearly all the work, so 2 stages cut 2 | 3 ([input, block0] | [block1, block2, head]); GPT's
// costs for the same 5 layers (a light embedding, equal blocks, a heavier head) cut 3 | 2
// (Cli.PlanConfigPlansAGptRunConfigWithOverrides and the CNN's test show GPT's and the CNN's).
TEST(CustomModelPlan, PlansTheMlpFromItsOwnLayerCosts) {
  const fs::path dir = testing::fresh_dir("mlp_plan");
  const auto result = testing::run_program(
      std::string(PIPETRAIN_BINARY_DIR) + "/custom_model_trainer",
      "plan --config " + std::string(PIPETRAIN_SOURCE_DIR) + "/examples/default.toml "
      "--model.kind mlp --data.format teacher --model.layers 3 --model.d_model 512 "
      "--out-ranked " + dir.string());
  ASSERT_EQ(result.exit_code, 0) << result.output;
  // Its parameters from its layers: 8*512+512, 3 * 2 * (512*512+512), 512*4+4 = 1,582,596.
  EXPECT_NE(result.output.find("model mlp (1.58M parameters)"), std::string::npos) << result.output;
  std::set<std::vector<int>> two_stage_partitions;
  int plans = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::ifstream in(entry.path());
    const auto plan = nlohmann::json::parse(in);
    ++plans;
    EXPECT_EQ(plan["model"], "mlp");
    EXPECT_EQ(plan["model_layers"],
              nlohmann::json({"input", "block0", "block1", "block2", "head"}));
    if (plan["stages"] == 2) two_stage_partitions.insert(plan["partition"].get<std::vector<int>>());
  }
  EXPECT_GT(plans, 0);
  EXPECT_EQ(two_stage_partitions, (std::set<std::vector<int>>{{2, 3}})) << result.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
