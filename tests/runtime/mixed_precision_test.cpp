// bfloat16 mixed precision on pipeline workers (CPU: this machine's AVX512-BF16) trains like the
// single-process bfloat16 run.
//
// The bound, from bfloat16 rounding: mixed precision rounds every layer's output to bfloat16
// (device/precision.h), so a stage boundary rounds exactly what the single process rounds there
// and both runs do the same bfloat16 and float32 arithmetic. They differ only where float32 sums
// are reassociated (the data-parallel all-reduce, the two copies of the tied embedding, the
// global norm's order): 2^-24 relative in a weight, which changes that weight's bfloat16 cast only
// if it sits on a rounding boundary, and then by one bfloat16 unit (2^-8 relative) in one element
// of one matrix. Over three steps that moves the loss by far less than 2^-12 relative: 1/16 of
// one bfloat16 unit. A run that computed anything in another precision (a boundary not rounded,
// a stage in float32) is further off than that: the float32 run differs from the bfloat16 one by
// more, which the last test checks, so this bound can tell them apart.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/text_dataset.h"
#include "io/metrics.h"
#include "model/registry.h"
#include "train/trainer.h"
#include "../pipetrain_run.h"
#include "../tiny_images.h"

namespace pipetrain {
namespace {

constexpr double kBfloat16Bound = 1.0 / 4096;  // 2^-12 relative

struct MixedCase {
  std::string name, schedule;
  int stages, microbatches, dp_width = 1;
  std::string model = "gpt";
};

std::vector<std::pair<std::string, std::string>> fields_for(const MixedCase& c) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"model.layers", "3"}, {"model.d_model", "32"}, {"model.heads", "2"}, {"model.seq_len", "16"},
      {"model.dtype", "bfloat16"}, {"train.batch_size", std::to_string(2 * c.microbatches * c.dp_width)},
      {"train.microbatches", std::to_string(c.microbatches)}, {"train.steps", "3"},
      {"train.warmup_steps", "1"}, {"train.lr", "1e-2"}, {"train.threads", "1"},
      {"train.device", "cpu"}, {"log.every", "1"}, {"eval.every", "0"}, {"eval.batches", "1"},
      {"sample.tokens", "0"}, {"pipeline.schedule", c.schedule},
      {"pipeline.stages", std::to_string(c.stages)}, {"pipeline.dp_width", std::to_string(c.dp_width)},
      {"pipeline.timeout_s", "60"}};
  if (c.model == "cnn") {
    fields.insert(fields.end(), {{"model.kind", "cnn"}, {"data.format", "fashion-mnist"},
                                 {"data.path", testing::tiny_image_folder()}});
    fields[1].second = "2";  // base channels
  }
  return fields;
}

std::vector<double> reference_losses(Config config, const MixedCase& c) {
  torch::set_num_threads(1);
  std::unique_ptr<Trainer> trainer;
  static std::map<int64_t, std::unique_ptr<TextDataset>> texts;  // outlive the Trainer
  if (c.model == "gpt") {
    auto& text = texts[config.model.seq_len];
    if (!text) {
      text = std::make_unique<TextDataset>(std::string(PIPETRAIN_SOURCE_DIR) + "/" + config.data.path,
                                           config.data.val_fraction, config.model.seq_len);
    }
    trainer = std::make_unique<Trainer>(config, *text);
  } else {  // BatchNorm: the replicas' microbatches are the reference's own (pipeline_exactness)
    config.train.microbatches *= c.dp_width;
    trainer = std::make_unique<Trainer>(config, make_batch_source(config, PIPETRAIN_SOURCE_DIR));
  }
  std::vector<double> losses;
  for (int64_t step = 0; step < config.train.steps; ++step) losses.push_back(trainer->train_step(step).loss);
  return losses;
}

Config config_of(const std::vector<std::pair<std::string, std::string>>& fields) {
  Config config;
  for (const auto& [key, value] : fields) set_field_from_string(config, key, value);
  return config;
}

class MixedPrecisionPipeline : public ::testing::TestWithParam<MixedCase> {};

TEST_P(MixedPrecisionPipeline, MatchesTheSingleProcessBfloat16RunWithinTheRoundingBound) {
  const MixedCase c = GetParam();
  const auto fields = fields_for(c);
  std::string args = "train --quiet";
  for (const auto& [key, value] : fields) args += " --" + key + " " + value;
  const auto dir = testing::fresh_dir("mixed_" + c.name);
  const auto run = testing::run_pipetrain(args + " --run-dir " + dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto records = read_metrics((dir / "metrics.jsonl").string());
  const auto expected = reference_losses(config_of(fields), c);
  ASSERT_EQ(records.size(), expected.size());
  for (size_t step = 0; step < expected.size(); ++step) {
    const double loss = records[step]["loss"].get<double>();
    EXPECT_LE(std::abs(loss - expected[step]), kBfloat16Bound * std::abs(expected[step]))
        << "step " << step << ": pipeline " << loss << " vs single process " << expected[step];
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, MixedPrecisionPipeline,
    ::testing::Values(MixedCase{"1f1b_p2_m2", "1f1b", 2, 2}, MixedCase{"gpipe_p3_m3", "gpipe", 3, 3},
                      MixedCase{"1f1b_p2_m2_w2", "1f1b", 2, 2, 2},
                      MixedCase{"zb_h1_p2_m4", "zb-h1", 2, 4},
                      MixedCase{"cnn_1f1b_p2_m2", "1f1b", 2, 2, 1, "cnn"}),
    [](const ::testing::TestParamInfo<MixedCase>& info) { return info.param.name; });

// The bound separates precisions: the float32 run of the same model is further from the
// bfloat16 one than 2^-12 (so a pipeline that skipped the bfloat16 arithmetic would fail above),
// and what crosses a stage boundary is bfloat16.
TEST(MixedPrecision, Float32IsOutsideTheBoundAndBoundariesCarryBfloat16) {
  const MixedCase c{"reference", "1f1b", 2, 2};
  Config mixed = config_of(fields_for(c));
  mixed.pipeline.stages = 1;
  Config full = mixed;
  full.model.dtype = "float32";
  const auto bf16 = reference_losses(mixed, c), fp32 = reference_losses(full, c);
  double largest = 0;
  for (size_t step = 0; step < bf16.size(); ++step) {
    largest = std::max(largest, std::abs(bf16[step] - fp32[step]) / std::abs(fp32[step]));
  }
  EXPECT_GT(largest, kBfloat16Bound);
  EXPECT_EQ(make_model(mixed)->boundary_spec(2, 4).dtype, torch::kBFloat16);
  EXPECT_EQ(make_model(full)->boundary_spec(2, 4).dtype, torch::kFloat32);
}

}  // namespace
}  // namespace pipetrain
