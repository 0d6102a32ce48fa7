// bfloat16 mixed precision on pipeline workers (CPU: this machine's AVX512-BF16) trains like the
// single-process bfloat16 run (GPT, the CNN and the RNN-T); float16 with its dynamic loss scale
// likewise, skipping the same overflowed steps, and resumes with its scale; on the no-flush
// schedules float16 follows the AsyncReference's rule (each weight version's scale).
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

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/files.h"
#include "data/text_dataset.h"
#include "io/metrics.h"
#include "model/registry.h"
#include "runtime/run_spec.h"
#include "train/async_reference.h"
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
  int sync_warmup_steps = 0;         // pipeline.sync_warmup_steps (2BW)
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

// The no-flush rules' single-process reference (train/async_reference.h), float16 included.
std::vector<StepResult> async_reference_steps(const Config& config) {
  torch::set_num_threads(1);
  static std::unique_ptr<TextDataset> text;  // outlives the reference
  if (!text) {
    text = std::make_unique<TextDataset>(std::string(PIPETRAIN_SOURCE_DIR) + "/" + config.data.path,
                                         config.data.val_fraction, config.model.seq_len);
  }
  std::vector<std::pair<int64_t, int64_t>> stages;
  for (const auto& range : runtime::make_run_spec(config).ranges) stages.push_back({range.first, range.last});
  AsyncReference reference(config, *text, stages);
  std::vector<StepResult> steps;
  for (int64_t step = 0; step < config.train.steps; ++step) steps.push_back(reference.train_step(step));
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

using Fields = std::vector<std::pair<std::string, std::string>>;

// `pipetrain train` with `fields` in a fresh folder: its metrics.jsonl records.
std::vector<nlohmann::json> pipeline_records(const Fields& fields, const std::string& name) {
  std::string args = "train --quiet";
  for (const auto& [key, value] : fields) args += " --" + key + " " + value;
  const auto dir = testing::fresh_dir(name);
  const auto run = testing::run_pipetrain(args + " --run-dir " + dir.string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  auto records = run.exit_code == 0 ? read_metrics((dir / "metrics.jsonl").string()) : std::vector<nlohmann::json>{};
  std::filesystem::remove_all(dir);
  return records;
}

// Each step's loss within the bound of the expected one; float16: the same scale, the same
// steps skipped.
void expect_steps_within_bound(const std::vector<nlohmann::json>& records,
                               const std::vector<StepResult>& expected, bool scaled) {
  ASSERT_EQ(records.size(), expected.size());
  for (size_t step = 0; step < expected.size(); ++step) {
    const double loss = records[step]["loss"].get<double>(), want = expected[step].loss;
    EXPECT_LE(std::abs(loss - want), kBfloat16Bound * std::abs(want))
        << "step " << step << ": pipeline " << loss << " vs reference " << want;
    if (!scaled) continue;
    EXPECT_EQ(records[step]["loss_scale"].get<double>(), expected[step].loss_scale) << "step " << step;
    EXPECT_EQ(records[step]["skipped"].get<bool>(), expected[step].skipped) << "step " << step;
  }
}

class MixedPrecisionPipeline : public ::testing::TestWithParam<MixedCase> {};

TEST_P(MixedPrecisionPipeline, MatchesTheSingleProcessBfloat16RunWithinTheRoundingBound) {
  const MixedCase c = GetParam();
  const auto fields = fields_for(c);
  expect_steps_within_bound(pipeline_records(fields, "mixed_" + c.name), reference_steps(config_of(fields), c),
                            c.dtype == "float16");
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

// Float16 on the no-flush schedules: each microbatch's loss takes the loss scale of the weight
// version its forward reads on the last stage (2BW: one update behind, so an update may run at
// the scale before the last overflow's; train/loss_scale.h), and every worker divides the same
// one out of that update. The pipeline equals the AsyncReference, which writes the rule out in
// one process, within the bound above: the same scales, the same updates skipped. At 2^22 the
// first updates overflow, so skipped and applied updates both occur.
class Float16NoFlush : public ::testing::TestWithParam<MixedCase> {};

TEST_P(Float16NoFlush, MatchesTheAsyncReferenceWithTheSameScalesAndSkips) {
  const MixedCase c = GetParam();
  auto fields = fields_for(c);
  for (auto& [key, value] : fields) {
    if (key == "train.steps") value = "8";
  }
  fields.emplace_back("pipeline.sync_warmup_steps", std::to_string(c.sync_warmup_steps));
  const auto expected = async_reference_steps(config_of(fields));
  expect_steps_within_bound(pipeline_records(fields, "f16_noflush_" + c.name), expected, true);
  const auto skipped = [](const StepResult& step) { return step.skipped; };
  EXPECT_TRUE(std::any_of(expected.begin(), expected.end(), skipped));
  EXPECT_FALSE(std::all_of(expected.begin(), expected.end(), skipped));
}

INSTANTIATE_TEST_SUITE_P(
    Schedules, Float16NoFlush,
    ::testing::Values(MixedCase{"2bw_p2_m2", "2bw", 2, 2, 1, "gpt", "float16", "4194304"},
                      MixedCase{"2bw_p3_m3", "2bw", 3, 3, 1, "gpt", "float16", "4194304"},
                      MixedCase{"2bw_p2_m2_sync2", "2bw", 2, 2, 1, "gpt", "float16", "4194304", 2},
                      MixedCase{"pipedream_p2_m2", "pipedream", 2, 2, 1, "gpt", "float16", "4194304"},
                      MixedCase{"pipeoptim_p2_m2", "pipeoptim", 2, 2, 1, "gpt", "float16", "4194304"}),
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

// `c` trained `steps` steps in one go, and `cut` steps then resumed to `steps`, at a constant
// learning rate: both runs' metrics (each must have `steps` records), and the cut's checkpoint.json.
struct ResumedRuns {
  std::vector<nlohmann::json> whole, resumed;
  nlohmann::json cut_info;
};

ResumedRuns whole_and_resumed(const MixedCase& c, int cut_step, int steps) {
  std::string args = "train --quiet --train.min_lr 1e-2 --train.warmup_steps 0";
  for (const auto& [key, value] : fields_for(c)) {
    if (key != "train.steps" && key != "train.warmup_steps") args += " --" + key + " " + value;
  }
  const auto whole = testing::fresh_dir(c.name + "_whole"), cut = testing::fresh_dir(c.name + "_cut");
  ResumedRuns runs;
  const auto first = testing::run_pipetrain(args + fmt::format(" --train.steps {} --run-dir {}", steps, whole.string()));
  const auto second = testing::run_pipetrain(args + fmt::format(" --train.steps {} --run-dir {}", cut_step, cut.string()));
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_EQ(second.exit_code, 0) << second.output;
  runs.cut_info = nlohmann::json::parse(read_file((cut / "checkpoint" / "checkpoint.json").string()));
  const auto resumed = testing::run_pipetrain(fmt::format("train --quiet --resume {} --train.steps {}", cut.string(), steps));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  runs.whole = read_metrics((whole / "metrics.jsonl").string());
  runs.resumed = read_metrics((cut / "metrics.jsonl").string());
  EXPECT_EQ(runs.whole.size(), size_t(steps));
  EXPECT_EQ(runs.resumed.size(), size_t(steps));
  std::filesystem::remove_all(whole);
  std::filesystem::remove_all(cut);
  return runs;
}

// The resumed run's losses and scales are the uninterrupted run's, bitwise.
void expect_same_steps(const ResumedRuns& runs, const std::string& what) {
  for (size_t step = 0; step < std::min(runs.whole.size(), runs.resumed.size()); ++step) {
    const auto &a = runs.whole[step], &b = runs.resumed[step];
    EXPECT_EQ(a["loss"].get<double>(), b["loss"].get<double>()) << what << ", step " << step;
    EXPECT_EQ(a["loss_scale"].get<double>(), b["loss_scale"].get<double>()) << what << ", step " << step;
  }
}

// A float16 run resumed from its checkpoint continues with the checkpoint's loss scale (not
// train.loss_scale again): its steps after the resume equal the uninterrupted run's, in one
// process and on 2 pipeline workers. Here every step before the cut overflowed, so the
// checkpoint's optimizer had not stepped (it resumes fresh) and the first updates come after it.
TEST(MixedPrecision, Float16ResumesWithItsLossScale) {
  for (const int stages : {1, 2}) {
    const MixedCase c{"mixed_f16_resume", "1f1b", stages, 2, 1, "gpt", "float16", "4194304"};
    const ResumedRuns runs = whole_and_resumed(c, 4, 8);
    ASSERT_EQ(runs.whole.size(), 8u);
    expect_same_steps(runs, std::to_string(stages) + " stage(s)");
    const auto& a = runs.whole;
    EXPECT_LT(a[4]["loss_scale"].get<double>(), 4194304);  // the scale had moved by the cut
    EXPECT_TRUE(a[4]["skipped"].get<bool>());
    EXPECT_FALSE(a[6]["skipped"].get<bool>());  // updates after the cut, seen in the last losses
    EXPECT_NE(a[7]["loss"].get<double>(), a[6]["loss"].get<double>());
  }
}

// 2BW resumed where its two scales differ: the step after the cut reads the version before the
// last update, so its loss takes the scale one decision back, which checkpoint.json keeps
// (loss_scale_previous).
TEST(MixedPrecision, Float16TwoBwResumesWithBothItsScales) {
  const MixedCase c{"mixed_f16_2bw_resume", "2bw", 2, 2, 1, "gpt", "float16", "262144"};
  const ResumedRuns runs = whole_and_resumed(c, 4, 10);
  ASSERT_EQ(runs.whole.size(), 10u);
  expect_same_steps(runs, "2bw");
  const double previous = runs.cut_info["loss_scale_previous"].get<double>();
  EXPECT_NE(runs.cut_info["loss_scale"].get<double>(), previous);
  EXPECT_TRUE(runs.whole[0]["skipped"].get<bool>());  // the scale moved before the cut
  EXPECT_EQ(runs.whole[4]["loss_scale"].get<double>(), previous);
}

}  // namespace
}  // namespace pipetrain
