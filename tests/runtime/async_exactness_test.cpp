// The no-flush weight policies on real worker processes must train exactly like the
// single-process AsyncReference, which writes each update rule out directly: same per-step
// losses, gradient norms and every final weight element, in float64 to 1e-9 relative
// (tests/exactness.h), for SGD-momentum, Adam and AdamW, p in {2, 4}.
// The measured weight copies per stage must be the policy's: 2 for 2BW, p - s for PipeDream,
// at most 2 for PipeOptim.
#include <algorithm>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "data/text_dataset.h"
#include "io/metrics.h"
#include "model/state_io.h"
#include "../tensor_exactness.h"
#include "../pipetrain_run.h"
#include "../exactness_models.h"
#include "model/registry.h"
#include "model/token_batch.h"
#include "runtime/run_spec.h"
#include "train/async_reference.h"
#include "train/trainer.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string schedule;
  int stages;
  std::string optimizer;
  int microbatches = 0;  // 0: m = p
  // model.loss_chunk_tokens on the pipeline; the reference always takes the full logits.
  int loss_chunk_tokens = 0;
  std::string delay_correction = "none";  // train.delay_correction
  std::string model = "gpt";  // model.kind: gpt or llama on bytes, cnn on tiny images, transducer on speech
  int dp_width = 1;  // replicas, each taking batch_size / w rows
  bool zero1 = false;  // pipeline.zero1: the optimizer state sharded over the replicas
  int sync_warmup_steps = 0;  // pipeline.sync_warmup_steps: steps trained synchronously first
  int steps = 4;  // train.steps
  std::string recompute = "none";  // pipeline.recompute
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.schedule + "_p" + std::to_string(info.param.stages) + "_" +
                     info.param.optimizer;
  if (info.param.microbatches > 0) name += "_m" + std::to_string(info.param.microbatches);
  if (info.param.loss_chunk_tokens > 0) name += "_ce" + std::to_string(info.param.loss_chunk_tokens);
  if (info.param.delay_correction != "none") name += "_" + info.param.delay_correction;
  if (info.param.dp_width > 1) name += "_w" + std::to_string(info.param.dp_width);
  if (info.param.zero1) name += "_zero1";
  if (info.param.sync_warmup_steps > 0) name += "_sync" + std::to_string(info.param.sync_warmup_steps);
  if (info.param.steps != 4) name += "_steps" + std::to_string(info.param.steps);
  if (info.param.recompute != "none") name += "_recompute";
  if (info.param.model != "gpt") name = info.param.model + "_" + name;
  for (auto& c : name) if (c == '-') c = '_';
  return name;
}

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.schedule << " p=" << c.stages << " " << c.optimizer
       << " m=" << (c.microbatches > 0 ? c.microbatches : c.stages)
       << " loss_chunk_tokens=" << c.loss_chunk_tokens << " delay_correction=" << c.delay_correction
       << " w=" << c.dp_width << (c.zero1 ? " zero1" : "") << " sync_warmup_steps=" << c.sync_warmup_steps
       << " steps=" << c.steps << " recompute=" << c.recompute;
}

// m = p microbatches of 2 rows (the smallest 2BW allows) unless the case says more; 4 steps reach
// versions 0..3 (2BW) and 4m updates (per-microbatch policies).
std::vector<std::pair<std::string, std::string>> fields_for(const Case& c) {
  const int m = c.microbatches > 0 ? c.microbatches : c.stages;
  std::vector<std::pair<std::string, std::string>> fields = {{"model.layers", "3"},       {"model.d_model", "32"},     {"model.heads", "2"},
          {"model.seq_len", "16"},     {"train.batch_size", std::to_string(2 * m)},
          {"train.steps", std::to_string(c.steps)}, {"train.warmup_steps", "1"}, {"train.lr", "1e-2"},
          {"train.threads", "1"},      {"train.microbatches", std::to_string(m)},
          {"train.optimizer", c.optimizer},
          {"train.weight_decay", "0.01"},  // AdamW's decoupled decay is exercised too
          {"train.grad_clip", "1.0"},  {"log.every", "1"},          {"eval.every", "2"},
          {"eval.batches", "1"},       {"sample.tokens", "0"},      {"pipeline.schedule", c.schedule},
          {"pipeline.stages", std::to_string(c.stages)},             {"pipeline.timeout_s", "60"},
          {"model.loss_chunk_tokens", std::to_string(c.loss_chunk_tokens)},
          {"train.delay_correction", c.delay_correction}, {"model.dtype", "float64"},
          {"pipeline.dp_width", std::to_string(c.dp_width)}, {"pipeline.zero1", c.zero1 ? "1" : "0"},
          {"pipeline.sync_warmup_steps", std::to_string(c.sync_warmup_steps)},
          {"pipeline.recompute", c.recompute}};
  testing::use_model(fields, c.model);
  return fields;
}

double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

// The weight copies the policy may hold on stage s of p (closed forms from the papers), on
// every replica (rank = replica * p + s).
void expect_weight_copies(const Case& c, const std::vector<int>& copies) {
  ASSERT_EQ(copies.size(), size_t(c.stages * c.dp_width));
  for (size_t rank = 0; rank < copies.size(); ++rank) {
    const int s = int(rank) % c.stages;
    const bool last = s + 1 == c.stages;
    // No checkpoint follows any step but the last here. In the last, the latest-weights
    // policies keep (predicted) copies of the p-1-s versions the next step's forwards would
    // read, for the final checkpoint to continue: p - s copies with the master.
    const int continued = c.stages - s;
    if (c.schedule == "spectrain") {  // predicts forward and (from stage 2 on) backward, whose
      // original kept aside may coexist with the kept copies in the drain
      EXPECT_LE(copies[rank], 1 + continued) << "stage " << s;
      continue;
    }
    int expected = 3;  // 2bw-predict: 2 predicted versions + the master
    if (c.schedule == "2bw") expected = 2;
    if (c.schedule == "pipedream") expected = c.stages - s;
    if (c.schedule == "pipeoptim") expected = std::max(last ? 1 : 2, continued);
    if (c.schedule == "pipedream-nostash") expected = continued;
    EXPECT_EQ(copies[rank], expected) << "stage " << s;
  }
}

class AsyncExactness : public ::testing::TestWithParam<Case> {};

TEST_P(AsyncExactness, MatchesTheReferenceUpdateRule) {
  const Case c = GetParam();
  Config config;
  std::string args = "train --quiet";
  for (const auto& [key, value] : fields_for(c)) {
    set_field_from_string(config, key, value);
    args += " --" + key + " " + value;
  }
  const auto dir = testing::fresh_dir("async_" + case_name({c, 0}));
  const auto run = testing::run_pipetrain(args + " --run-dir " + dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // In float32 at 1e-5 chunking's rounding differences grew past the tolerance over 4 no-flush
  // Adam steps (on one element of layer3.fc.weight whose gradient is ~0), so the reference
  // used to chunk too; in float64 it takes the full logits, as PipelineExactness does.
  config.model.loss_chunk_tokens = 0;
  torch::set_num_threads(1);
  const std::shared_ptr<const BatchSource> data =
      c.model == "gpt" || c.model == "llama" ? std::make_shared<TokenBatchSource>(
                             std::make_unique<TextDataset>(std::string(PIPETRAIN_SOURCE_DIR) + "/" + config.data.path,
                                                           config.data.val_fraction, config.model.seq_len),
                             config.data.path)
                       : make_batch_source(config, PIPETRAIN_SOURCE_DIR);
  std::vector<std::pair<int64_t, int64_t>> stages;
  for (const auto& range : runtime::make_run_spec(config).ranges) stages.push_back({range.first, range.last});
  AsyncReference reference(config, data, stages);
  Trainer synchronous(config, data);  // the policy must not be the synchronous rule in disguise
  const auto records = read_metrics((dir / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), size_t(config.train.steps));
  double sync_gap = 0;
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const StepResult expected = reference.train_step(step);
    const double loss = records[step]["loss"].get<double>();
    const double grad_norm = records[step]["grad_norm"].get<double>();
    EXPECT_TRUE(testing::exactly_close(loss, expected.loss))
        << "step " << step << ": loss " << loss << " vs " << expected.loss;
    EXPECT_TRUE(testing::exactly_close(grad_norm, expected.grad_norm))
        << "step " << step << ": grad norm " << grad_norm << " vs " << expected.grad_norm;
    const double synchronous_loss = synchronous.train_step(step).loss;
    sync_gap = std::max(sync_gap, std::abs(synchronous_loss - expected.loss));
    // A synchronous warm-up of N steps: groups 0..N read the latest weights, as 1F1B does.
    if (step <= c.sync_warmup_steps && c.sync_warmup_steps > 0) {
      EXPECT_TRUE(testing::exactly_close(loss, synchronous_loss))
          << "warm-up step " << step << ": loss " << loss << " vs synchronous " << synchronous_loss;
    }
  }
  EXPECT_GT(sync_gap, 1e-4) << "the losses equal synchronous training";
  // A predicting policy must differ from the same schedule without prediction.
  const std::map<std::string, std::string> unpredicted = {
      {"pipeoptim", "pipedream-nostash"}, {"spectrain", "pipedream-nostash"}, {"2bw-predict", "2bw"}};
  // On one stage nothing is stale, so only 2bw-predict (one update ahead) still predicts.
  if (unpredicted.count(c.schedule) && (c.stages > 1 || c.schedule == "2bw-predict")) {
    Config plain = config;
    plain.pipeline.schedule = unpredicted.at(c.schedule);
    AsyncReference without(plain, data, stages);
    for (int64_t step = 0; step < config.train.steps; ++step) without.train_step(step);
    const auto a = reference.named_weights(), b = without.named_weights();
    double gap = 0;
    for (size_t i = 0; i < a.size(); ++i) gap = std::max(gap, relative_difference(a[i].second, b[i].second));
    EXPECT_GT(gap, 1e-5) << "prediction changed nothing";
  }
  if (c.delay_correction != "none") {  // the correction must change the training
    Config plain = config;
    plain.train.delay_correction = "none";
    AsyncReference without(plain, data, stages);
    double gap = 0;
    for (int64_t step = 0; step < config.train.steps; ++step) {
      gap = std::max(gap, std::abs(without.train_step(step).loss - records[step]["loss"].get<double>()));
    }
    EXPECT_GT(gap, 1e-5) << "error feedback changed nothing";
  }

  std::map<std::string, torch::Tensor> saved;
  for (int s = 0; s < c.stages; ++s) {
    const auto path = (dir / "checkpoint" / fmt::format("stage{}.safetensors", s)).string();
    for (const auto& entry : decode_safetensors(read_file(path), path)) {
      EXPECT_EQ(entry.dtype, "F64") << entry.name;
      saved[entry.name] = from_entry(entry);
    }
  }
  for (const auto& [name, want] : reference.named_weights()) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(testing::parameter_mismatch(name, saved[name], want, c.optimizer), "") << name;
  }
  const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
  expect_weight_copies(c, summary["weight_copies"].get<std::vector<int>>());
  fs::remove_all(dir);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* schedule :
       {"2bw", "pipedream", "pipeoptim", "spectrain", "2bw-predict", "pipedream-nostash"}) {
    for (int p : {2, 4}) {
      for (const char* optimizer : {"sgd", "adam", "adamw"}) cases.push_back({schedule, p, optimizer});
    }
  }
  // More microbatches than stages (m > d: a version spans more than the pipeline's depth).
  cases.push_back({"2bw", 2, "adam", 5});
  cases.push_back({"2bw", 4, "sgd", 6});
  cases.push_back({"2bw-predict", 2, "adamw", 4});
  cases.push_back({"pipeoptim", 2, "adam", 3});
  cases.push_back({"pipedream", 3, "sgd", 5});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Runtime, AsyncExactness, ::testing::ValuesIn(all_cases()), case_name);
// One stage is still the policy, not synchronous training (issue 16, 3d: `--stages 1 --schedule
// 2bw` trained synchronously): 2BW's one-step-delayed gradients, and the per-microbatch policies'
// update after every microbatch (on one stage PipeDream, PipeOptim and SpecTrain coincide).
INSTANTIATE_TEST_SUITE_P(OneStage, AsyncExactness,
                         ::testing::Values(Case{"2bw", 1, "adam", 2}, Case{"2bw-predict", 1, "adamw", 2},
                                           Case{"pipedream", 1, "sgd", 2}, Case{"pipeoptim", 1, "adam", 2},
                                           Case{"spectrain", 1, "sgd", 2}),
                         case_name);
// Muon under every no-flush policy (its matrices predicted with their own update), and the
// error-feedback correction for 2BW (and its predicted variant).
INSTANTIATE_TEST_SUITE_P(
    DelayRobust, AsyncExactness,
    ::testing::Values(Case{"2bw", 2, "muon"}, Case{"2bw", 4, "muon"}, Case{"2bw-predict", 2, "muon"},
                      Case{"pipedream", 2, "muon"}, Case{"pipeoptim", 2, "muon"},
                      Case{"spectrain", 2, "muon"}, Case{"2bw", 2, "adamw", 0, 0, "error_feedback"},
                      Case{"2bw", 4, "sgd", 0, 0, "error_feedback"},
                      Case{"2bw", 2, "muon", 3, 0, "error_feedback"},
                      Case{"2bw-predict", 2, "adamw", 0, 0, "error_feedback"}),
    case_name);
// Recomputation (pipeline.recompute) under the policies whose backward reads the weights its
// forward read: the forward run again in backward rebuilds the same activations, so the rule is
// the reference's as without it; with replicas and ZeRO-1, a warm-up, and the CNN's BatchNorm.
Case recomputing(Case c, const char* stages = "all") {
  c.recompute = stages;
  return c;
}
INSTANTIATE_TEST_SUITE_P(
    Recompute, AsyncExactness,
    ::testing::Values(recomputing({"2bw", 2, "adamw"}), recomputing({"2bw", 3, "sgd", 4}, "0"),
                      recomputing({"2bw-predict", 2, "adam"}), recomputing({"pipedream", 3, "adam"}),
                      recomputing({"2bw", 2, "adam", 0, 0, "none", "gpt", 2, true}),
                      recomputing({"2bw", 2, "adamw", 0, 0, "none", "gpt", 1, false, 1}),
                      recomputing({"2bw", 2, "sgd", 0, 0, "none", "cnn"})),
    case_name);
// A synchronous warm-up before 2BW's rule (pipeline.sync_warmup_steps): flushed steps, then the
// delayed ones from a fresh fill; on one and several stages, with error feedback, and wide.
Case warmed_up(Case c, int sync_steps) {
  c.sync_warmup_steps = sync_steps;
  return c;
}
INSTANTIATE_TEST_SUITE_P(
    SyncWarmup, AsyncExactness,
    ::testing::Values(warmed_up({"2bw", 2, "adamw"}, 1), warmed_up({"2bw", 4, "sgd", 5}, 2),
                      warmed_up({"2bw", 1, "adam", 2}, 1),
                      warmed_up({"2bw", 2, "muon", 3, 0, "error_feedback"}, 1),
                      warmed_up({"2bw", 2, "adam", 0, 0, "none", "gpt", 2}, 1)),
    case_name);
// Data parallelism: w = 2 replicas, each all-reducing its group gradient before the update, train
// exactly like the reference on the same global batch (update i covers every replica's
// microbatch i), for every no-flush policy; and with ZeRO-1 (2BW and PipeDream; the predicting
// policies extrapolate with the whole optimizer state and refuse it).
Case wide(const char* schedule, int stages, const char* optimizer, int microbatches = 0,
          bool zero1 = false) {
  Case c{schedule, stages, optimizer, microbatches};
  c.dp_width = 2;
  c.zero1 = zero1;
  return c;
}
INSTANTIATE_TEST_SUITE_P(
    Wide, AsyncExactness,
    ::testing::Values(wide("2bw", 2, "adamw"), wide("2bw", 3, "sgd", 4), wide("2bw-predict", 2, "adam"),
                      wide("pipedream", 2, "adam"), wide("pipedream", 3, "sgd"),
                      wide("pipeoptim", 2, "adamw"), wide("spectrain", 3, "sgd"),
                      wide("pipedream-nostash", 2, "adam"), wide("2bw", 2, "adamw", 0, true),
                      wide("2bw", 3, "adam", 4, true), wide("pipedream", 2, "adam", 0, true),
                      wide("pipedream", 3, "sgd", 3, true)),
    case_name);
// A no-flush run posts its replica all-reduce and joins it where the update is first needed; a
// flush schedule still waits for it at once. The numbers must be the blocking ones, bit for bit.
// At learning rate 0 2BW's update rule is 1F1B-flush's (every version is the initial weights), so
// 2BW at w = 2 must give 1F1B's losses and global gradient norms exactly: any gradient the posted
// sum lost, landed late (after the norm) or mixed with the run-on's next gradients changes them.
TEST(WideAsync, PostedReplicaSumsGiveTheBlockingNumbersBitwise) {
  std::map<std::string, std::vector<std::pair<double, double>>> steps;  // schedule -> (loss, norm)
  std::map<std::string, std::map<std::string, torch::Tensor>> weights;
  for (const char* schedule : {"2bw", "1f1b"}) {
    Case c{schedule, 3, "adamw", 4};
    c.dp_width = 2;
    std::string args = "train --quiet";
    for (auto [key, value] : fields_for(c)) {
      if (key == "train.lr") value = "0";
      if (key == "train.steps") value = "5";
      args += " --" + key + " " + value;
    }
    const auto dir = testing::fresh_dir(std::string("posted_sums_") + schedule);
    const auto run = testing::run_pipetrain(args + " --train.min_lr 0 --run-dir " + dir.string());
    ASSERT_EQ(run.exit_code, 0) << run.output;
    for (const auto& record : read_metrics((dir / "metrics.jsonl").string())) {
      steps[schedule].emplace_back(record["loss"].get<double>(), record["grad_norm"].get<double>());
    }
    for (int s = 0; s < c.stages; ++s) {
      const auto path = (dir / "checkpoint" / fmt::format("stage{}.safetensors", s)).string();
      for (const auto& entry : decode_safetensors(read_file(path), path)) weights[schedule][entry.name] = from_entry(entry);
    }
    fs::remove_all(dir);
  }
  ASSERT_EQ(steps["2bw"].size(), 5u);
  ASSERT_EQ(steps["1f1b"].size(), 5u);
  for (size_t k = 0; k < steps["2bw"].size(); ++k) {
    EXPECT_EQ(steps["2bw"][k].first, steps["1f1b"][k].first) << "loss of step " << k;
    EXPECT_EQ(steps["2bw"][k].second, steps["1f1b"][k].second) << "gradient norm of step " << k;
    EXPECT_GT(steps["2bw"][k].second, 0.1) << "step " << k;  // real gradients were summed
  }
  ASSERT_EQ(weights["2bw"].size(), weights["1f1b"].size());
  for (const auto& [name, tensor] : weights["1f1b"]) {
    ASSERT_TRUE(weights["2bw"].count(name)) << name;
    EXPECT_TRUE(torch::equal(weights["2bw"][name], tensor)) << name;
  }
}

// Chunked cross-entropy on the last stage under no-flush policies.
INSTANTIATE_TEST_SUITE_P(ChunkedLoss, AsyncExactness,
                         ::testing::Values(Case{"2bw", 2, "adamw", 0, 7}, Case{"pipedream", 2, "adam", 0, 5}),
                         case_name);

// The CNN (BatchNorm) under 2BW: its one-step-delayed gradients, running statistics and all.
INSTANTIATE_TEST_SUITE_P(Cnn, AsyncExactness,
                         ::testing::Values(Case{"2bw", 2, "adamw", 0, 0, "none", "cnn"},
                                           Case{"2bw", 2, "sgd", 4, 0, "none", "cnn"}),
                         case_name);

// Llama under 2BW (and its predicting variant, PipeOptim's rule) on 2 and 4 stages.
INSTANTIATE_TEST_SUITE_P(Llama, AsyncExactness,
                         ::testing::Values(Case{"2bw", 2, "adamw", 0, 0, "none", "llama"},
                                           Case{"2bw", 4, "adam", 0, 0, "none", "llama"},
                                           Case{"2bw-predict", 2, "muon", 0, 0, "none", "llama"},
                                           Case{"pipeoptim", 2, "adamw", 0, 0, "none", "llama"}),
                         case_name);

// The RNN-T (ragged utterances, sample-wise loss on the last stage) under 2BW on 2 and 3 stages.
INSTANTIATE_TEST_SUITE_P(Transducer, AsyncExactness,
                         ::testing::Values(Case{"2bw", 2, "adamw", 0, 0, "none", "transducer"},
                                           Case{"2bw", 3, "adamw", 0, 0, "none", "transducer"}),
                         case_name);

// Runs long enough that the workers' lists are a short list pumped (schedule::StepLists): the
// steady steps repeated, shifted, and (with a warm-up of more than 6 steps) the flushed ones too.
Case long_run(Case c, int steps) {
  c.steps = steps;
  return c;
}
INSTANTIATE_TEST_SUITE_P(
    LongRun, AsyncExactness,
    ::testing::Values(long_run({"2bw", 2, "adam"}, 24), long_run({"pipedream", 2, "sgd"}, 24),
                      long_run({"pipedream", 4, "sgd", 2}, 24), long_run({"pipeoptim", 3, "adam"}, 24),
                      long_run({"spectrain", 2, "sgd"}, 24), long_run({"2bw-predict", 2, "adamw"}, 24),
                      long_run(warmed_up({"2bw", 2, "adamw"}, 9), 26),
                      long_run({"2bw", 2, "sgd", 0, 0, "none", "gpt", 2}, 24)),
    case_name);

}  // namespace
}  // namespace pipetrain
