// bfloat16 mixed precision on pipeline workers (CPU: this machine's AVX512-BF16) trains like the
// single-process bfloat16 run (GPT, the CNN and the RNN-T); float16 with its dynamic loss scale
// likewise, skipping the same overflowed steps, and resumes with its scale.
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
// more, which the last test checks, so this bound can tell them apart. Float16 has 3 more bits
// (one unit is 2^-11 relative), so the same argument gives the same bound with room to spare; its
// loss scale is a power of two (exact) that every worker moves alike (train/loss_scale.h).
#include <gtest/gtest.h>

#include <algorithm>
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
#include "../tiny_speech.h"

namespace pipetrain {
namespace {

constexpr double kBfloat16Bound = 1.0 / 4096;  // 2^-12 relative

struct MixedCase {
  std::string name, schedule;
  int stages, microbatches, dp_width = 1;
  std::string model = "gpt";
  std::string dtype = "bfloat16";
  std::string loss_scale = "65536";  // float16: 2^22 overflows the first steps' gradients
};

std::vector<std::pair<std::string, std::string>> fields_for(const MixedCase& c) {
  std::vector<std::pair<std::string, std::string>> fields = {
      {"model.layers", "3"}, {"model.d_model", "32"}, {"model.heads", "2"}, {"model.seq_len", "16"},
      {"model.dtype", c.dtype}, {"train.batch_size", std::to_string(2 * c.microbatches * c.dp_width)},
      {"train.microbatches", std::to_string(c.microbatches)}, {"train.steps", c.dtype == "float16" ? "6" : "3"},
      {"train.warmup_steps", "1"}, {"train.lr", "1e-2"}, {"train.threads", "1"},
      {"train.device", "cpu"}, {"log.every", "1"}, {"eval.every", "0"}, {"eval.batches", "1"},
      {"sample.tokens", "0"}, {"pipeline.schedule", c.schedule},
      {"pipeline.stages", std::to_string(c.stages)}, {"pipeline.dp_width", std::to_string(c.dp_width)},
      {"pipeline.timeout_s", "60"}};
  if (c.dtype == "float16") {
    fields.insert(fields.end(), {{"train.loss_scale", c.loss_scale}, {"train.loss_scale_growth_interval", "2"}});
  }
  if (c.model == "cnn") {
    fields.insert(fields.end(), {{"model.kind", "cnn"}, {"data.format", "fashion-mnist"},
                                 {"data.path", testing::tiny_image_folder()}});
    fields[1].second = "2";  // base channels
  }
  if (c.model == "transducer") {  // width 16 over the tiny speech file's ragged utterances
    fields.insert(fields.end(), {{"model.kind", "transducer"}, {"model.max_labels", "6"},
                                 {"data.format", "speech"}, {"data.path", testing::tiny_speech_file()}});
    fields[1].second = "16";
    fields[3].second = "40";  // frames
  }
  return fields;
}

std::vector<StepResult> reference_steps(Config config, const MixedCase& c) {
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
  std::vector<StepResult> steps;
  for (int64_t step = 0; step < config.train.steps; ++step) steps.push_back(trainer->train_step(step));
  return steps;
}

std::vector<double> reference_losses(const Config& config, const MixedCase& c) {
  std::vector<double> losses;
  for (const StepResult& step : reference_steps(config, c)) losses.push_back(step.loss);
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
  const auto expected = reference_steps(config_of(fields), c);
  ASSERT_EQ(records.size(), expected.size());
  for (size_t step = 0; step < expected.size(); ++step) {
    const double loss = records[step]["loss"].get<double>(), want = expected[step].loss;
    EXPECT_LE(std::abs(loss - want), kBfloat16Bound * std::abs(want))
        << "step " << step << ": pipeline " << loss << " vs single process " << want;
    if (c.dtype != "float16") continue;  // the same scale, the same steps skipped
    EXPECT_EQ(records[step]["loss_scale"].get<double>(), expected[step].loss_scale) << "step " << step;
    EXPECT_EQ(records[step]["skipped"].get<bool>(), expected[step].skipped) << "step " << step;
  }
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, MixedPrecisionPipeline,
    ::testing::Values(MixedCase{"1f1b_p2_m2", "1f1b", 2, 2}, MixedCase{"gpipe_p3_m3", "gpipe", 3, 3},
                      MixedCase{"1f1b_p2_m2_w2", "1f1b", 2, 2, 2},
                      MixedCase{"zb_h1_p2_m4", "zb-h1", 2, 4},
                      MixedCase{"cnn_1f1b_p2_m2", "1f1b", 2, 2, 1, "cnn"},
                      MixedCase{"transducer_1f1b_p2_m2", "1f1b", 2, 2, 1, "transducer"},
                      MixedCase{"transducer_gpipe_p3_m2", "gpipe", 3, 2, 1, "transducer"},
                      MixedCase{"transducer_float16_1f1b_p2_m2", "1f1b", 2, 2, 1, "transducer", "float16"},
                      MixedCase{"float16_1f1b_p2_m2", "1f1b", 2, 2, 1, "gpt", "float16"},
                      MixedCase{"float16_overflow_gpipe_p2_m2", "gpipe", 2, 2, 1, "gpt", "float16", "4194304"}),
    [](const ::testing::TestParamInfo<MixedCase>& info) { return info.param.name; });

// The bound separates precisions: the float32 run of the same model is further from the
// bfloat16 one than 2^-12 (so a pipeline that skipped the bfloat16 arithmetic would fail above),
// and what crosses a stage boundary is bfloat16.
TEST(MixedPrecision, Float32IsOutsideTheBoundAndBoundariesCarryBfloat16) {
  for (const std::string model : {"gpt", "transducer"}) {
    MixedCase c{"reference", "1f1b", 2, 2};
    c.model = model;
    Config mixed = config_of(fields_for(c));
    mixed.pipeline.stages = 1;
    Config full = mixed;
    full.model.dtype = "float32";
    const auto bf16 = reference_losses(mixed, c), fp32 = reference_losses(full, c);
    double largest = 0;
    for (size_t step = 0; step < bf16.size(); ++step) {
      largest = std::max(largest, std::abs(bf16[step] - fp32[step]) / std::abs(fp32[step]));
    }
    EXPECT_GT(largest, kBfloat16Bound) << model;
    EXPECT_EQ(make_model(mixed)->boundary_spec(2, 4).dtype, torch::kBFloat16) << model;
    EXPECT_EQ(make_model(full)->boundary_spec(2, 4).dtype, torch::kFloat32) << model;
  }
}

// Float16 at a scale of 2^22: the tiny model's gradients overflow float16 at first, so the first
// step is skipped, and the scale halves until steps apply, then doubles after two good steps in
// a row (growth interval 2): the rule of train/loss_scale.h, restated here step by step.
TEST(MixedPrecision, Float16SkipsOverflowedStepsAndMovesItsScale) {
  const MixedCase c{"float16_overflow", "1f1b", 2, 2, 1, "gpt", "float16", "4194304"};
  Config config = config_of(fields_for(c));
  config.pipeline.stages = 1;
  const auto steps = reference_steps(config, c);
  ASSERT_TRUE(steps.front().skipped);
  EXPECT_TRUE(std::any_of(steps.begin(), steps.end(), [](const auto& s) { return !s.skipped; }));
  double scale = 4194304;
  int good = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].loss_scale, scale) << "step " << i;
    EXPECT_EQ(std::isfinite(steps[i].grad_norm), !steps[i].skipped) << "step " << i;
    if (steps[i].skipped) {
      scale /= 2, good = 0;
    } else if (++good == 2) {
      scale *= 2, good = 0;
    }
  }
}

// A float16 run resumed from its checkpoint continues with the checkpoint's loss scale (not
// train.loss_scale again): its steps after the resume equal the uninterrupted run's, in one
// process and on 2 pipeline workers. Here every step before the cut overflowed, so the
// checkpoint's optimizer had not stepped (it resumes fresh) and the first updates come after it.
TEST(MixedPrecision, Float16ResumesWithItsLossScale) {
  for (const int stages : {1, 2}) {
    const MixedCase c{"float16_resume", "1f1b", stages, 2, 1, "gpt", "float16", "4194304"};
    std::string args = "train --quiet --train.min_lr 1e-2 --train.warmup_steps 0";
    for (const auto& [key, value] : fields_for(c)) {
      if (key != "train.steps" && key != "train.warmup_steps") args += " --" + key + " " + value;
    }
    const auto whole = testing::fresh_dir("mixed_f16_whole"), cut = testing::fresh_dir("mixed_f16_cut");
    ASSERT_EQ(testing::run_pipetrain(args + " --train.steps 8 --run-dir " + whole.string()).exit_code, 0);
    ASSERT_EQ(testing::run_pipetrain(args + " --train.steps 4 --run-dir " + cut.string()).exit_code, 0);
    const auto resumed = testing::run_pipetrain("train --quiet --resume " + cut.string() + " --train.steps 8");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    const auto a = read_metrics((whole / "metrics.jsonl").string());
    const auto b = read_metrics((cut / "metrics.jsonl").string());
    ASSERT_EQ(a.size(), 8u);
    ASSERT_EQ(b.size(), 8u);
    for (size_t step = 0; step < 8; ++step) {
      EXPECT_EQ(a[step]["loss"].get<double>(), b[step]["loss"].get<double>()) << stages << " stage(s), step " << step;
      EXPECT_EQ(a[step]["loss_scale"].get<double>(), b[step]["loss_scale"].get<double>()) << "step " << step;
    }
    EXPECT_LT(a[4]["loss_scale"].get<double>(), 4194304);  // the scale had moved by the cut
    EXPECT_TRUE(a[4]["skipped"].get<bool>());
    EXPECT_FALSE(a[6]["skipped"].get<bool>());  // updates after the cut, seen in the last losses
    EXPECT_NE(a[7]["loss"].get<double>(), a[6]["loss"].get<double>());
    std::filesystem::remove_all(whole);
    std::filesystem::remove_all(cut);
  }
}

}  // namespace
}  // namespace pipetrain
