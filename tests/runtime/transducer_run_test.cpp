// The RNN-T through `pipetrain train` on 2 workers: the validation CER in metrics.jsonl and
// summary.json and the decoded examples in sample.txt are exactly what the single-process trainer's
// model gives after the same steps (float64, tiny generated feature file).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "io/metrics.h"
#include "../exactness.h"
#include "../pipetrain_run.h"
#include "../tiny_speech.h"
#include "model/registry.h"
#include "train/trainer.h"

namespace pipetrain {
namespace {

double measure_named(const Measures& measures, const std::string& name) {
  for (const auto& [key, value] : measures) {
    if (key == name) return value;
  }
  ADD_FAILURE() << "no measure " << name;
  return -1;
}

TEST(TransducerRun, ValidationCerAndDecodedExamplesMatchTheSingleProcessModel) {
  const std::vector<std::pair<std::string, std::string>> fields = {
      {"model.kind", "transducer"},
      {"model.layers", "2"},
      {"model.d_model", "8"},
      {"model.heads", "2"},
      {"model.seq_len", "40"},
      {"model.max_labels", "6"},
      {"model.dtype", "float64"},
      {"data.format", "speech"},
      {"data.path", testing::tiny_speech_file()},
      {"train.batch_size", "4"},
      {"train.microbatches", "2"},
      {"train.steps", "3"},
      {"train.lr", "3e-2"},
      {"train.warmup_steps", "1"},
      {"train.threads", "1"},
      {"eval.every", "0"},
      {"eval.batches", "2"},
      {"log.every", "1"},
      {"sample.tokens", "1"},
      {"pipeline.stages", "2"},
      {"pipeline.schedule", "1f1b"},
      {"pipeline.timeout_s", "60"}};
  Config config;
  std::string args = "train --quiet";
  for (const auto& [key, value] : fields) {
    set_field_from_string(config, key, value);
    args += " --" + key + " " + value;
  }
  const auto dir = testing::fresh_dir("transducer_run");
  const auto run = testing::run_pipetrain(args + " --run-dir " + dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;

  torch::set_num_threads(1);
  const auto batches = make_batch_source(config, PIPETRAIN_SOURCE_DIR);
  Trainer reference(config, batches);
  for (int64_t step = 0; step < config.train.steps; ++step) reference.train_step(step);
  const Validation want = reference.evaluate(false);
  const double want_cer = measure_named(want.measures, "cer");

  const auto records = read_metrics((dir / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), 3u);
  EXPECT_TRUE(testing::exactly_close(records.back()["val_loss"].get<double>(), want.loss));
  EXPECT_EQ(records.back()["val_cer"].get<double>(), want_cer);  // a ratio of edit counts
  const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
  EXPECT_EQ(summary["final_val_cer"].get<double>(), want_cer);

  const std::string examples = reference.model().describe_examples(batches->val_batch(0, 5), 5);
  ASSERT_NE(examples.find("reference: "), std::string::npos);
  EXPECT_EQ(read_file((dir / "sample.txt").string()), examples + "\n");
}

// The transducer's layers are timed on what the layers before them make of an example (random
// values of its boundary's shape broke its frames' mask: "logit length 0 of sample 0"), its
// head split into B and W as zero-bubble runs it; its plan names its kind.
TEST(TransducerRun, ProfileTimesTheTransducerAndPlansIt) {
  const std::filesystem::path dir = testing::fresh_dir("profile_transducer");
  std::filesystem::create_directories(dir);
  const std::string speech = "--model.kind transducer --model.layers 1 --model.d_model 8 --model.heads 2 "
                             "--model.seq_len 40 --model.max_labels 6 --data.format speech --data.path " +
                             testing::tiny_speech_file();
  const auto profiled = testing::run_pipetrain("profile " + speech + " --microbatch-sizes 1,2 --repeats 1 --out " +
                                               (dir / "profile.json").string());
  ASSERT_EQ(profiled.exit_code, 0) << profiled.output;
  // Each layer's times beside the analytic ones `plan --config` would take, and their sums.
  EXPECT_NE(profiled.output.find("measured against the analytic costs of `plan --config`"),
            std::string::npos) << profiled.output;
  for (const std::string row : {"| subsample | ", "| encoder0 | ", "| joint | ", "| all layers | "}) {
    EXPECT_NE(profiled.output.find(row), std::string::npos) << row << profiled.output;
  }
  // Its loss reads two values on the host in the forward (the microbatch's longest label and
  // frame counts, which cut its tensors; device/host_reads.h), none in the backward; the other
  // layers read none: where a GPU's host waits, and why the step is not captured as a graph.
  EXPECT_NE(profiled.output.find("| layer | forward | backward |\n|---|---|---|\n| joint | 2, 2 | 0, 0 |\n"),
            std::string::npos) << profiled.output;
  const auto profile = nlohmann::json::parse(std::ifstream(dir / "profile.json"));
  EXPECT_EQ(profile["model_kind"], "transducer");
  for (const auto& layer : profile["layers"]) {
    for (const auto& timing : layer["by_microbatch"]) {
      EXPECT_GT(timing["forward_s"].get<double>(), 0) << layer.dump();
      EXPECT_GT(timing["weight_s"].get<double>(), 0) << layer.dump();
      EXPECT_EQ(timing["host_reads_forward"].get<int64_t>(), layer["name"] == "joint" ? 2 : 0) << layer.dump();
      EXPECT_EQ(timing["host_reads_backward"].get<int64_t>(), 0) << layer.dump();
    }
  }
  const auto planned = testing::run_pipetrain("plan --profile " + (dir / "profile.json").string() +
                                              " --global-batch 4 --out " + (dir / "plan.json").string());
  ASSERT_EQ(planned.exit_code, 0) << planned.output;
  const auto plan = nlohmann::json::parse(std::ifstream(dir / "plan.json"));
  EXPECT_EQ(plan["model_kind"], "transducer");
  // The profiled model's fields go with the plan (`train --plan plan.json` alone trains it), and
  // a run that makes it another model refuses the plan before training.
  EXPECT_EQ(plan["config_fields"]["model.kind"], "transducer") << plan.dump();
  EXPECT_EQ(plan["config_fields"]["data.format"], "speech") << plan.dump();
  testing::expect_one_line_error("train --plan " + (dir / "plan.json").string() + " --model.kind gpt --train.steps 1",
                                 "is a plan for a transducer model, but this run's model.kind is gpt");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
