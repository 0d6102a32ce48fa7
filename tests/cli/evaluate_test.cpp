// `pipetrain evaluate` on the real binary: a pipeline run's checkpoints, validated in one
// process, give the validation the run itself logged at their steps (float64: only the
// microbatching of the validation batches differs, tests/exactness.h); bad input is one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "../exactness.h"
#include "../pipetrain_run.h"
#include "../tiny_images.h"
#include "io/metrics.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// A 2-stage 1F1B run of the CNN on tiny images, validated at steps 2 and 4, with a periodic
// checkpoint at each; made once for the suite.
class Evaluate : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    run_ = testing::fresh_dir("evaluate_cnn");
    const auto result = testing::run_pipetrain(
        "train --model.kind cnn --model.layers 2 --model.d_model 2 --model.heads 1 "
        "--data.format fashion-mnist --data.path " + testing::tiny_image_folder() +
        " --model.dtype float64 --train.batch_size 4 --train.microbatches 2 --train.steps 4 "
        "--train.lr 1e-2 --train.warmup_steps 1 --eval.every 2 --eval.batches 2 "
        "--checkpoint.every 2 --checkpoint.keep 2 --sample.tokens 0 --train.threads 1 "
        "--stages 2 --schedule 1f1b --quiet --run-dir " + run_.string());
    ASSERT_EQ(result.exit_code, 0) << result.output;
  }
  static void TearDownTestSuite() { fs::remove_all(run_); }
  static fs::path run_;
};

fs::path Evaluate::run_;

// The run's metrics.jsonl records that hold a validation, by step.
std::map<int64_t, nlohmann::json> validations_by_step(const fs::path& run) {
  std::map<int64_t, nlohmann::json> out;
  for (const auto& record : read_metrics((run / "metrics.jsonl").string())) {
    if (record.contains("val_loss")) out[record["step"].get<int64_t>()] = record;
  }
  return out;
}

nlohmann::json evaluate_json(const std::string& args) {
  const auto result = testing::run_pipetrain("evaluate --json " + args);
  EXPECT_EQ(result.exit_code, 0) << result.output;
  return nlohmann::json::parse(result.output);
}

void expect_same_validation(const nlohmann::json& got, const nlohmann::json& logged) {
  EXPECT_TRUE(testing::exactly_close(got["val_loss"].get<double>(), logged["val_loss"].get<double>()))
      << got["val_loss"] << " vs " << logged["val_loss"];
  EXPECT_TRUE(testing::exactly_close(got["val_accuracy"].get<double>(),
                                     logged["val_accuracy"].get<double>()));
}

TEST_F(Evaluate, NewestCheckpointOfAPipelineRunGivesItsLastValidation) {
  const fs::path& run = run_;
  const auto logged = validations_by_step(run);
  ASSERT_EQ(logged.size(), 2u);
  const auto got = evaluate_json("--run-dir " + run.string());
  EXPECT_EQ(got["step"], 4);
  EXPECT_EQ(got["split"], "validation");
  EXPECT_EQ(got["batches"], 2);
  EXPECT_EQ(fs::path(got["checkpoint"].get<std::string>()), run / "checkpoint");
  expect_same_validation(got, logged.at(4));
  EXPECT_NE(logged.at(2)["val_loss"], logged.at(4)["val_loss"]);  // the weights did move
}

TEST_F(Evaluate, GivenCheckpointGivesTheValidationAtItsStep) {
  const fs::path& run = run_;
  const auto logged = validations_by_step(run);
  const auto got = evaluate_json("--run-dir " + run.string() + " --checkpoint " +
                                 (run / "checkpoints" / "step-000002").string());
  EXPECT_EQ(got["step"], 2);
  expect_same_validation(got, logged.at(2));
}

// Overrides apply to the run's config: one validation batch is the first of the two.
TEST_F(Evaluate, OverridesApplyToTheRunsConfig) {
  const fs::path& run = run_;
  const auto two = evaluate_json("--run-dir " + run.string());
  const auto one = evaluate_json("--run-dir " + run.string() + " --eval.batches 1");
  EXPECT_EQ(one["batches"], 1);
  EXPECT_NE(one["val_loss"], two["val_loss"]);
  const auto text = testing::run_pipetrain("evaluate --run-dir " + run.string());
  EXPECT_NE(text.output.find("validation loss "), std::string::npos) << text.output;
  EXPECT_NE(text.output.find(", accuracy "), std::string::npos) << text.output;
  // Progress as it validates (stderr, here not a terminal: every tenth of the batches, the last).
  EXPECT_NE(text.output.find("batch 2/2 | validating 2 of 2 batches | ETA 0s"), std::string::npos) << text.output;
  EXPECT_EQ(evaluate_json("--run-dir " + run.string()), two);  // --json: the JSON alone
}

TEST_F(Evaluate, BadInputGetsOneLine) {
  const fs::path& run = run_;
  const fs::path bare = testing::fresh_dir("evaluate_bare");
  fs::create_directories(bare);
  testing::expect_one_line_error("evaluate", "evaluate needs --run-dir");
  testing::expect_one_line_error("evaluate --run-dir " + (bare / "missing").string(), "does not exist");
  testing::expect_one_line_error("evaluate --run-dir " + bare.string(), "no config.toml");
  fs::copy_file(run / "config.toml", bare / "config.toml");
  testing::expect_one_line_error("evaluate --run-dir " + bare.string(), "has no checkpoint");
  testing::expect_one_line_error("evaluate --run-dir " + run.string() + " --checkpoint " +
                                     (run / "checkpoints" / "step-000099").string(),
                                 "does not exist");
  testing::expect_one_line_error(
      "evaluate --run-dir " + run.string() + " --checkpoint " + run.string(), "no checkpoint.json");
  testing::expect_one_line_error("evaluate --run-dir " + run.string() + " --split nope",
                                 "data.val_split must be one of validation, test, unseen-voice");
  testing::expect_one_line_error("evaluate --run-dir " + run.string() + " --model.d_model 4",
                                 "tensor 'layer0.conv.weight' has shape [2, 1, 3, 3]");
  testing::expect_one_line_error("evaluate other.toml --run-dir " + run.string(),
                                 "evaluate reads the run's own config");
  fs::remove_all(bare);
}

}  // namespace
}  // namespace pipetrain
