// examples/custom_model's residual MLP (a model pipetrain has never heard of, registered by the
// program that links it) trains on real workers exactly as in one process: per-step losses,
// gradient norms and every final weight in float64 to 1e-9 relative (tests/exactness.h), under
// sync schedules (GPipe, 1F1B, interleaved; data parallelism, recomputation; Muon on the default
// roles' matrices) against the Trainer and under 2BW against the AsyncReference.
#include <gtest/gtest.h>

#include <map>

#include <fmt/format.h>

#include "../pipetrain_run.h"
#include "../tensor_exactness.h"
#include "core/files.h"
#include "io/metrics.h"
#include "model/state_io.h"
#include "residual_mlp.h"
#include "runtime/run_spec.h"
#include "schedule/catalogue.h"
#include "train/async_reference.h"
#include "train/trainer.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

struct MlpCase {
  std::string schedule;
  int stages;
  int microbatches;
  int dp_width = 1;
  std::string recompute = "none";
  int chunks = 1;  // model chunks per worker (interleaved)
  std::string optimizer = "adamw";
};

std::string mlp_case_name(const ::testing::TestParamInfo<MlpCase>& info) {
  const MlpCase& c = info.param;
  std::string name = fmt::format("{}_p{}_m{}_w{}", c.schedule, c.stages, c.microbatches, c.dp_width);
  if (c.recompute != "none") name += "_recompute";
  if (c.chunks > 1) name += "_v" + std::to_string(c.chunks);
  if (c.optimizer != "adamw") name += "_" + c.optimizer;
  for (auto& ch : name) if (ch == '-') ch = '_';
  return name;
}

void PrintTo(const MlpCase& c, std::ostream* out) { *out << mlp_case_name({c, 0}); }

std::vector<std::pair<std::string, std::string>> mlp_fields(const MlpCase& c) {
  return {{"model.kind", "mlp"}, {"data.format", "teacher"}, {"model.dtype", "float64"},
          {"model.layers", "3"}, {"model.d_model", "8"}, {"train.batch_size", "8"},
          {"train.microbatches", std::to_string(c.microbatches)}, {"train.steps", "4"},
          {"train.lr", "1e-2"}, {"train.warmup_steps", "1"}, {"train.grad_clip", "1.0"},
          {"train.threads", "1"}, {"log.every", "1"}, {"eval.every", "0"}, {"eval.batches", "1"},
          {"sample.tokens", "0"}, {"pipeline.schedule", c.schedule},
          {"pipeline.stages", std::to_string(c.stages)},
          {"pipeline.dp_width", std::to_string(c.dp_width)}, {"pipeline.recompute", c.recompute},
          {"pipeline.chunks", std::to_string(c.chunks)}, {"train.optimizer", c.optimizer},
          {"pipeline.timeout_s", "60"}};
}

// The same names in this process as in the example's program.
void register_mlp_once() {
  static const bool registered = (residual_mlp::register_with_pipetrain(), true);
  (void)registered;
}

// Losses and grad norms per step, then every weight by name, of the single-process reference.
struct ReferenceRun {
  std::vector<StepResult> steps;
  std::map<std::string, torch::Tensor> weights;
};

ReferenceRun reference_run(const Config& config) {
  const auto batches = make_batch_source(config, PIPETRAIN_SOURCE_DIR);
  ReferenceRun run;
  if (schedule::schedule_entry(config.pipeline.schedule).flushes()) {
    Trainer trainer(config, batches);
    for (int64_t step = 0; step < config.train.steps; ++step) run.steps.push_back(trainer.train_step(step));
    for (const auto& item : trainer.model().named_parameters()) run.weights[item.key()] = item.value();
    return run;
  }
  std::vector<std::pair<int64_t, int64_t>> stages;
  for (const auto& range : runtime::make_run_spec(config).ranges) stages.push_back({range.first, range.last});
  AsyncReference reference(config, batches, stages);
  for (int64_t step = 0; step < config.train.steps; ++step) run.steps.push_back(reference.train_step(step));
  for (const auto& [name, weight] : reference.named_weights()) run.weights[name] = weight;
  return run;
}

class CustomModelExactness : public ::testing::TestWithParam<MlpCase> {};

TEST_P(CustomModelExactness, MatchesItsSingleProcessRun) {
  const MlpCase c = GetParam();
  register_mlp_once();
  Config config;
  std::string args = "train --quiet";
  for (const auto& [key, value] : mlp_fields(c)) {
    set_field_from_string(config, key, value);
    args += " --" + key + " " + value;
  }
  const auto dir = testing::fresh_dir("mlp_" + mlp_case_name({c, 0}));
  const auto run = testing::run_program(std::string(PIPETRAIN_BINARY_DIR) + "/custom_model_trainer",
                                        args + " --run-dir " + dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;

  torch::set_num_threads(1);
  const ReferenceRun reference = reference_run(config);
  const auto records = read_metrics((dir / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), size_t(config.train.steps));
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const double loss = records[step]["loss"].get<double>();
    const double grad_norm = records[step]["grad_norm"].get<double>();
    EXPECT_TRUE(testing::exactly_close(loss, reference.steps[step].loss))
        << "step " << step << ": loss " << loss << " vs " << reference.steps[step].loss;
    EXPECT_TRUE(testing::exactly_close(grad_norm, reference.steps[step].grad_norm))
        << "step " << step << ": grad norm " << grad_norm << " vs " << reference.steps[step].grad_norm;
  }
  std::map<std::string, torch::Tensor> saved;
  for (int s = 0; s < c.stages * c.chunks; ++s) {
    const auto path = (dir / "checkpoint" / fmt::format("stage{}.safetensors", s)).string();
    for (const auto& entry : decode_safetensors(read_file(path), path)) saved[entry.name] = from_entry(entry);
  }
  ASSERT_EQ(saved.size(), reference.weights.size());
  for (const auto& [name, want] : reference.weights) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(testing::elementwise_mismatch(saved[name], want), "") << name;
  }
  fs::remove_all(dir);
}

// A model that does not run mixed precision refuses it in one line (require_full_precision),
// rather than training in float32 under a bfloat16 label.
TEST(CustomModel, RefusesMixedPrecisionInOneLine) {
  std::string args = "train --quiet";
  for (const auto& [key, value] : mlp_fields(MlpCase{"1f1b", 2, 2})) args += " --" + key + " " + value;
  const auto dir = testing::fresh_dir("mlp_bf16");
  const auto run = testing::run_program(std::string(PIPETRAIN_BINARY_DIR) + "/custom_model_trainer",
                                        args + " --model.dtype bfloat16 --run-dir " + dir.string());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_EQ(run.output,
            "pipetrain: error: model.dtype = \"bfloat16\" is not supported for model.kind \"mlp\" yet "
            "(the example computes in its weights' dtype); use float32 or float64\n");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Examples, CustomModelExactness,
    ::testing::Values(MlpCase{"gpipe", 2, 2}, MlpCase{"1f1b", 2, 4}, MlpCase{"1f1b", 3, 4},
                      MlpCase{"2bw", 2, 2}, MlpCase{"1f1b", 2, 2, 2},
                      MlpCase{"1f1b", 2, 4, 1, "all"}, MlpCase{"interleaved", 2, 4, 1, "none", 2},
                      MlpCase{"interleaved", 2, 4, 1, "1", 2}, MlpCase{"1f1b", 2, 4, 1, "none", 1, "muon"}),
    mlp_case_name);

}  // namespace
}  // namespace pipetrain
