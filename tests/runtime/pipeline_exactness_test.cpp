// A pipelined run on real worker processes must train exactly like the single-process Trainer:
// same per-step losses and gradient norms and every final weight element, in float64 to 1e-9
// relative (tests/exactness.h), whatever the schedule, stage count, microbatch count, partition,
// data-parallel width, chunks per worker, recomputation, ZeRO-1, token slices or chunked loss.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/files.h"
#include "data/text_dataset.h"
#include "io/metrics.h"
#include "model/state_io.h"
#include "../tensor_exactness.h"
#include "../pipetrain_run.h"
#include "../exactness_models.h"
#include "model/registry.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string schedule;
  int stages;
  int microbatches;
  std::string partition;  // "balanced" or counts over embedding + 3 blocks + head (5 layers)
  int dp_width = 1;       // replicas; p = 1, w = 2 is pure data parallelism, still on workers
  int chunks = 1;         // model chunks per worker (interleaved): stages * chunks model stages
  std::string recompute = "none";  // pipeline.recompute: stages that recompute activations
  int zero1 = 0;          // 1: optimizer state sharded over the replicas (ZeRO-1)
  std::string optimizer = "adamw";
  std::string slices = "1";        // pipeline.slices: TeraPipe token slices of the 16 tokens
  int loss_chunk_tokens = 0;       // model.loss_chunk_tokens: chunked cross-entropy on the last stage
  int blocks = 3;                  // model.layers: 4 x 2 interleaved model stages need more than 3
  std::string delay_correction = "none";  // train.delay_correction
  // model.kind: gpt on bytes; llama (grouped-query attention, untied head) or llama_tied on
  // bytes; cnn on tiny images (blocks = residual blocks); transducer on tiny speech
  std::string model = "gpt";

  // 6 rows as before; otherwise the smallest batch every replica's microbatches divide evenly.
  int batch_size() const { return 6 % (microbatches * dp_width) == 0 ? 6 : 2 * microbatches * dp_width; }
  // Several chunks per worker also validate after the last step: the batch visits a worker more
  // than once (twice in a row at a V's turn).
  bool validates() const { return chunks > 1; }
  int model_stages() const { return stages * chunks; }
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  std::string partition = info.param.partition;
  for (auto& c : partition) if (c == ',') c = '_';
  const Case& c = info.param;
  std::string name = c.schedule + "_p" + std::to_string(c.stages) + "_m" +
                     std::to_string(c.microbatches);
  if (c.dp_width > 1) name += "_w" + std::to_string(c.dp_width);
  if (c.chunks > 1) name += "_v" + std::to_string(c.chunks);
  if (c.recompute != "none") name += "_recompute_" + c.recompute;
  if (c.slices != "1") name += "_slices_" + c.slices;
  for (auto& ch : name) if (ch == ',' || ch == '-') ch = '_';
  if (c.zero1 == 1) name += "_zero1_" + c.optimizer;
  if (c.zero1 == 0 && c.optimizer != "adamw") name += "_" + c.optimizer;
  if (c.delay_correction != "none") name += "_" + c.delay_correction;
  if (c.loss_chunk_tokens > 0) name += "_ce" + std::to_string(c.loss_chunk_tokens);
  if (c.blocks != 3) name += "_blocks" + std::to_string(c.blocks);
  if (c.model != "gpt") name = c.model + "_" + name;
  return name + "_" + partition;
}

Case cnn_case(Case c) {
  c.model = "cnn";
  return c;
}

Case llama_case(Case c, const std::string& kind = "llama") {
  c.model = kind;
  return c;
}

bool is_decoder(const Case& c) { return c.model == "gpt" || c.model.rfind("llama", 0) == 0; }

Case transducer_case(Case c) {
  c.model = "transducer";
  return c;
}

// The same fields for the reference Config and for the command line.
std::vector<std::pair<std::string, std::string>> fields_for(const Case& c) {
  auto fields = std::vector<std::pair<std::string, std::string>>{{"model.layers", std::to_string(c.blocks)},        {"model.d_model", "32"},      {"model.heads", "2"},
          {"model.seq_len", "16"},      {"train.batch_size", std::to_string(c.batch_size())},    {"train.steps", "3"},
          {"train.warmup_steps", "1"},  {"train.lr", "1e-2"},          {"train.threads", "1"},
          {"train.microbatches", std::to_string(c.microbatches)},
          {"train.grad_clip", "1.0"},  // active: the norm is above 1 at the start
          {"log.every", "1"},           {"eval.every", c.validates() ? "3" : "0"},          {"eval.batches", "1"},
          {"sample.tokens", "0"},       {"pipeline.schedule", c.schedule},
          {"pipeline.stages", std::to_string(c.stages)}, {"pipeline.partition", c.partition},
          {"pipeline.dp_width", std::to_string(c.dp_width)},
          {"pipeline.chunks", std::to_string(c.chunks)}, {"pipeline.timeout_s", "60"},
          {"pipeline.recompute", c.recompute},
          {"pipeline.zero1", std::to_string(c.zero1)}, {"train.optimizer", c.optimizer},
          {"pipeline.slices", c.slices},
          {"model.loss_chunk_tokens", std::to_string(c.loss_chunk_tokens)},
          {"train.delay_correction", c.delay_correction}, {"model.dtype", "float64"}};
  testing::use_model(fields, c.model);
  return fields;
}

// The single-process run of the same model. BatchNorm normalises each microbatch with its own
// statistics, so the reference takes the replicas' microbatches (m per replica, in replica
// order) as its own: m w of them.
Trainer reference_trainer(Config config, const Case& c) {
  if (is_decoder(c)) {
    static std::map<std::string, std::unique_ptr<TextDataset>> texts;  // outlive the Trainer
    auto& data = texts[config.data.path + std::to_string(config.model.seq_len)];
    if (!data) {
      data = std::make_unique<TextDataset>(std::string(PIPETRAIN_SOURCE_DIR) + "/" + config.data.path,
                                           config.data.val_fraction, config.model.seq_len);
    }
    return Trainer(config, *data);
  }
  config.train.microbatches *= c.dp_width;
  return Trainer(config, make_batch_source(config, PIPETRAIN_SOURCE_DIR));
}

void PrintTo(const Case& c, std::ostream* out) {
  *out << c.schedule << " p=" << c.stages << " m=" << c.microbatches << " w=" << c.dp_width
       << " v=" << c.chunks << " partition=" << c.partition << " recompute=" << c.recompute
       << " zero1=" << c.zero1
       << " optimizer=" << c.optimizer << " slices=" << c.slices
       << " loss_chunk_tokens=" << c.loss_chunk_tokens << " delay_correction=" << c.delay_correction;
}

class PipelineExactness : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineExactness, MatchesTheSingleProcessTrainer) {
  const Case c = GetParam();
  const auto fields = fields_for(c);
  Config config;
  std::string args = "train --quiet";
  for (const auto& [key, value] : fields) {
    set_field_from_string(config, key, value);
    args += " --" + key + " " + value;
  }
  const auto dir = testing::fresh_dir(case_name({c, 0}));
  const auto run = testing::run_pipetrain(args + " --run-dir " + dir.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;

  // The reference always materialises the full logits: a chunked pipeline must train like it.
  config.model.loss_chunk_tokens = 0;
  torch::set_num_threads(1);
  Trainer reference = reference_trainer(config, c);
  const auto records = read_metrics((dir / "metrics.jsonl").string());
  ASSERT_EQ(records.size(), size_t(config.train.steps));
  for (int64_t step = 0; step < config.train.steps; ++step) {
    const StepResult expected = reference.train_step(step);
    // metrics.jsonl holds each double's shortest round-trip form: the exact value.
    const double loss = records[step]["loss"].get<double>();
    const double grad_norm = records[step]["grad_norm"].get<double>();
    EXPECT_TRUE(testing::exactly_close(loss, expected.loss))
        << "step " << step << ": loss " << loss << " vs " << expected.loss;
    EXPECT_TRUE(testing::exactly_close(grad_norm, expected.grad_norm))
        << "step " << step << ": grad norm " << grad_norm << " vs " << expected.grad_norm;
  }
  if (c.validates()) {
    const double val_loss = records.back()["val_loss"].get<double>(), want = reference.evaluate(false).loss;
    EXPECT_TRUE(testing::exactly_close(val_loss, want)) << "validation " << val_loss << " vs " << want;
  }

  // Final weights: the launcher's assembled model, and the head's own copy of the tied weight.
  std::map<std::string, torch::Tensor> saved;
  const auto path = (dir / "checkpoint" / "model.safetensors").string();
  for (const auto& entry : decode_safetensors(read_file(path), path)) {
    EXPECT_EQ(entry.dtype, "F64") << entry.name;
    saved[entry.name] = from_entry(entry);
  }
  for (const auto& item : reference.model().named_parameters()) {
    const std::string& name = item.key();
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(testing::parameter_mismatch(name, saved[name], item.value(), c.optimizer), "") << name;
  }
  // Running statistics (the CNN's BatchNorm) are updated microbatch by microbatch in order, once
  // per forward (a recomputed one restores them). Replicas average theirs at each all-reduce, which
  // the sequential reference does not: there they only have to be in the checkpoint.
  for (const auto& item : reference.model().named_buffers()) {
    const std::string& name = item.key();
    ASSERT_TRUE(saved.count(name)) << name;
    if (c.dp_width > 1) continue;
    EXPECT_EQ(testing::elementwise_mismatch(saved[name], item.value()), "") << name;
  }
  // The assembled optimizer state has the single-process checkpoint's names.
  const auto optimizer_path = (dir / "checkpoint" / "optimizer.safetensors").string();
  std::set<std::string> state_names, expected_names;
  for (const auto& entry : decode_safetensors(read_file(optimizer_path), optimizer_path)) {
    state_names.insert(entry.name);
  }
  for (const auto& [name, tensor] : optimizer_state_tensors(reference.optimizer(), reference.model())) {
    expected_names.insert(name);
  }
  EXPECT_EQ(state_names, expected_names);
  if (c.model_stages() > 1 && (c.model == "gpt" || c.model == "llama_tied")) {
    const auto last =
        (dir / "checkpoint" / fmt::format("stage{}.safetensors", c.model_stages() - 1)).string();
    bool found = false;
    for (const auto& entry : decode_safetensors(read_file(last), last)) {
      if (entry.name != fmt::format("layer{}.tied_weight", c.blocks + 1)) continue;
      found = true;
      EXPECT_EQ(testing::elementwise_mismatch(from_entry(entry), saved["layer0.token_weight"]), "");
    }
    EXPECT_TRUE(found);
  }
  if (c.model_stages() > 1) {
    EXPECT_TRUE(fs::exists(dir / "trace.json"));  // the real-run timeline
  }
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, PipelineExactness,
    ::testing::Values(Case{"gpipe", 2, 1, "balanced"}, Case{"gpipe", 2, 2, "balanced"},
                      Case{"gpipe", 2, 3, "balanced"}, Case{"1f1b", 2, 1, "balanced"},
                      Case{"1f1b", 2, 2, "balanced"}, Case{"1f1b", 2, 3, "balanced"},
                      Case{"1f1b", 2, 3, "1,4"}, Case{"gpipe", 2, 2, "4,1"},
                      Case{"1f1b", 3, 3, "2,2,1"}, Case{"1f1b", 4, 3, "1,1,2,1"},
                      Case{"gpipe", 4, 2, "2,1,1,1"},
                      // Data parallelism: w = 2 replicas, gradients all-reduced per stage.
                      Case{"1f1b", 1, 1, "balanced", 2}, Case{"1f1b", 1, 2, "balanced", 2},
                      Case{"gpipe", 2, 1, "balanced", 2}, Case{"1f1b", 2, 2, "balanced", 2},
                      // Interleaved 1F1B: 2 chunks per worker, looping placement.
                      Case{"interleaved", 2, 2, "balanced", 1, 2},
                      Case{"interleaved", 2, 4, "balanced", 1, 2},
                      Case{"interleaved", 2, 4, "1,1,2,1", 1, 2},
                      // Eight microbatches.
                      Case{"gpipe", 2, 8, "balanced"}, Case{"1f1b", 2, 8, "balanced"},
                      Case{"gpipe", 4, 8, "balanced"}, Case{"1f1b", 4, 8, "balanced"},
                      // Activation recomputation: every stage, some stages, with chunks.
                      Case{"1f1b", 2, 3, "balanced", 1, 1, "all"},
                      Case{"gpipe", 4, 2, "2,1,1,1", 1, 1, "0,3"},
                      Case{"interleaved", 2, 4, "balanced", 1, 2, "1,2"},
                      // ZeRO-1: optimizer state sharded over w = 2 replicas.
                      Case{"1f1b", 1, 2, "balanced", 2, 1, "none", 1, "sgd"},
                      Case{"1f1b", 1, 2, "balanced", 2, 1, "none", 1, "adam"},
                      Case{"1f1b", 1, 2, "balanced", 2, 1, "none", 1, "adamw"},
                      Case{"1f1b", 2, 2, "balanced", 2, 1, "none", 1, "sgd"},
                      Case{"1f1b", 2, 2, "balanced", 2, 1, "none", 1, "adam"},
                      Case{"1f1b", 2, 2, "balanced", 2, 1, "none", 1, "adamw"},
                      Case{"interleaved", 2, 2, "balanced", 2, 2, "none", 1, "adam"},
                      // The rest of the p x m x w grid: GPipe at p = 4 with m = 1 and 3,
                      // replicas with uneven partitions and m in {3, 8}, p = 4 with replicas
                      // (8 workers), interleaved at m = 8 and at p = 4 (8 model stages).
                      Case{"gpipe", 4, 1, "balanced"}, Case{"gpipe", 4, 3, "1,2,1,1"},
                      Case{"1f1b", 4, 1, "2,1,1,1"},
                      Case{"gpipe", 2, 3, "1,4", 2}, Case{"1f1b", 2, 8, "4,1", 2},
                      Case{"1f1b", 4, 3, "balanced", 2},
                      Case{"interleaved", 2, 8, "balanced", 1, 2},
                      Case{"interleaved", 4, 4, "balanced", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"interleaved", 4, 8, "1,1,1,1,1,1,1,1", 1, 2, "none", 0, "adamw", "1", 0, 6}),
    case_name);

// Zero-bubble ZB-H1 (backward split into B and W passes) and looped breadth-first (v = 2 chunks
// per worker, every microbatch of a chunk before the next): p in {2, 4}, m in {p, 2p, 3p}, uneven
// partitions, recomputation, w = 2 replicas, ZeRO-1.
INSTANTIATE_TEST_SUITE_P(
    ZeroBubbleAndBreadthFirst, PipelineExactness,
    ::testing::Values(Case{"zb-h1", 2, 2, "balanced"}, Case{"zb-h1", 2, 4, "balanced"},
                      Case{"zb-h1", 2, 6, "1,4"}, Case{"zb-h1", 4, 4, "2,1,1,1"},
                      Case{"zb-h1", 4, 8, "balanced"}, Case{"zb-h1", 4, 12, "1,1,2,1"},
                      Case{"zb-h1", 2, 4, "balanced", 1, 1, "all"},
                      Case{"zb-h1", 4, 4, "balanced", 1, 1, "0,2"},
                      Case{"zb-h1", 2, 2, "balanced", 2},
                      Case{"zb-h1", 2, 2, "4,1", 2, 1, "none", 1, "adam"},
                      Case{"bfs", 2, 2, "balanced", 1, 2}, Case{"bfs", 2, 4, "1,1,2,1", 1, 2},
                      Case{"bfs", 2, 6, "balanced", 1, 2},
                      Case{"bfs", 4, 4, "balanced", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"bfs", 4, 8, "1,1,1,1,1,1,1,1", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"bfs", 4, 12, "balanced", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"bfs", 2, 4, "balanced", 1, 2, "1,2"},
                      Case{"bfs", 2, 2, "balanced", 2, 2},
                      Case{"bfs", 2, 2, "1,1,2,1", 2, 2, "none", 1, "adam"}),
    case_name);

// ZB-H2 (2p-1 microbatches in flight, W deferred), and the V placements ZB-V and DualPipeV (two
// chunks per worker, stages w and 2p-1-w: worker 0 holds the embedding and the loss, and the turn
// at worker p-1 hands activations and gradients over without a transfer): p in {2, 4}, m in
// {p, 2p, 3p} where valid (DualPipeV: m >= 2p), uneven partitions, recomputation, w = 2
// replicas, ZeRO-1, and a Llama with its untied head.
INSTANTIATE_TEST_SUITE_P(
    ZeroBubbleH2AndVShapes, PipelineExactness,
    ::testing::Values(Case{"zb-h2", 2, 2, "balanced"}, Case{"zb-h2", 2, 4, "1,4"},
                      Case{"zb-h2", 2, 6, "balanced"}, Case{"zb-h2", 4, 4, "2,1,1,1"},
                      Case{"zb-h2", 4, 8, "balanced"}, Case{"zb-h2", 4, 12, "1,1,2,1"},
                      Case{"zb-h2", 2, 4, "balanced", 1, 1, "all"},
                      Case{"zb-h2", 4, 8, "balanced", 1, 1, "1,3"},
                      Case{"zb-h2", 2, 2, "balanced", 2},
                      Case{"zb-h2", 2, 4, "4,1", 2, 1, "none", 1, "adam"},
                      Case{"zb-v", 2, 2, "balanced", 1, 2}, Case{"zb-v", 2, 4, "1,1,2,1", 1, 2},
                      Case{"zb-v", 2, 6, "balanced", 1, 2},
                      Case{"zb-v", 4, 4, "balanced", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"zb-v", 4, 8, "2,1,1,1,1,1,1,1", 1, 2, "none", 0, "adamw", "1", 0, 7},
                      Case{"zb-v", 4, 12, "balanced", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"zb-v", 2, 4, "balanced", 1, 2, "1,2"},
                      Case{"zb-v", 2, 2, "balanced", 2, 2},
                      Case{"zb-v", 2, 4, "1,1,2,1", 2, 2, "none", 1, "adam"},
                      Case{"dualpipev", 2, 4, "balanced", 1, 2},
                      Case{"dualpipev", 2, 6, "2,1,1,1", 1, 2},
                      Case{"dualpipev", 4, 8, "balanced", 1, 2, "none", 0, "adamw", "1", 0, 6},
                      Case{"dualpipev", 4, 12, "1,1,1,1,1,1,1,2", 1, 2, "none", 0, "adamw", "1", 0, 7},
                      Case{"dualpipev", 2, 4, "balanced", 1, 2, "0,3"},
                      Case{"dualpipev", 2, 4, "balanced", 2, 2},
                      Case{"dualpipev", 2, 4, "1,2,1,1", 2, 2, "none", 1, "adam"},
                      llama_case(Case{"zb-v", 2, 4, "balanced", 1, 2}),
                      llama_case(Case{"dualpipev", 2, 4, "balanced", 1, 2}, "llama_tied")),
    case_name);

// TeraPipe token slicing (GPipe over slices): uneven slices, one to four stages, several
// microbatches, data parallelism; the K/V gradients of later slices flow into earlier ones.
INSTANTIATE_TEST_SUITE_P(
    TokenSlices, PipelineExactness,
    ::testing::Values(Case{"gpipe", 1, 1, "balanced", 1, 1, "none", 0, "adamw", "3,8,5"},
                      Case{"gpipe", 1, 2, "balanced", 1, 1, "none", 0, "adamw", "4"},
                      Case{"gpipe", 2, 1, "balanced", 1, 1, "none", 0, "adamw", "5,7,4"},
                      Case{"gpipe", 2, 3, "1,4", 1, 1, "none", 0, "adamw", "2,9,5"},
                      Case{"gpipe", 4, 1, "balanced", 1, 1, "none", 0, "adamw", "4"},
                      Case{"gpipe", 4, 2, "2,1,1,1", 1, 1, "none", 0, "adamw", "7,6,3"},
                      Case{"gpipe", 2, 2, "balanced", 2, 1, "none", 0, "adamw", "6,10"},
                      // Recomputed: each slice's backward runs its forward again on the cache.
                      Case{"gpipe", 2, 2, "balanced", 1, 1, "all", 0, "adamw", "5,7,4"},
                      Case{"gpipe", 3, 1, "1,2,2", 1, 1, "1", 0, "adamw", "4"}),
    case_name);

// The Llama family (grouped-query attention, rotary positions, SwiGLU, RMSNorm, untied or tied
// head) through the same grid: schedules, an uneven partition, interleaving, zero bubble,
// recomputation, data parallelism, token slices (rotary positions continue across slices),
// chunked cross-entropy, and Muon's roles of its matrices.
INSTANTIATE_TEST_SUITE_P(
    Llama, PipelineExactness,
    ::testing::Values(llama_case(Case{"gpipe", 2, 2, "balanced"}),
                      llama_case(Case{"1f1b", 2, 3, "1,4"}),
                      llama_case(Case{"1f1b", 4, 3, "1,1,2,1"}),
                      llama_case(Case{"interleaved", 2, 4, "balanced", 1, 2}),
                      llama_case(Case{"zb-h1", 2, 4, "balanced"}),
                      llama_case(Case{"bfs", 2, 4, "balanced", 1, 2}),
                      llama_case(Case{"1f1b", 2, 3, "balanced", 1, 1, "all"}),
                      llama_case(Case{"1f1b", 2, 2, "balanced", 2}),
                      llama_case(Case{"1f1b", 2, 2, "balanced", 2, 1, "none", 1, "adam"}),
                      llama_case(Case{"gpipe", 2, 2, "balanced", 1, 1, "none", 0, "adamw", "5,7,4"}),
                      llama_case(Case{"gpipe", 2, 2, "balanced", 1, 1, "all", 0, "adamw", "5,7,4"}),
                      llama_case(Case{"1f1b", 2, 2, "balanced", 1, 1, "none", 0, "adamw", "1", 7}),
                      llama_case(Case{"1f1b", 2, 3, "balanced", 1, 1, "none", 0, "muon"}),
                      llama_case(Case{"1f1b", 2, 3, "balanced"}, "llama_tied"),
                      llama_case(Case{"gpipe", 4, 2, "2,1,1,1", 1, 1, "0,3"}, "llama_tied")),
    case_name);

// Chunked cross-entropy (model.loss_chunk_tokens) on the last stage, against the reference
// with the full logits: 2 stages with chunks that do not divide a microbatch's tokens (and
// with one chunk covering them all), with recomputation of the last stage, and with token
// slices (each slice's loss chunked on its own).
INSTANTIATE_TEST_SUITE_P(
    ChunkedLoss, PipelineExactness,
    ::testing::Values(Case{"1f1b", 2, 2, "balanced", 1, 1, "none", 0, "adamw", "1", 7},
                      Case{"gpipe", 2, 3, "1,4", 1, 1, "none", 0, "adamw", "1", 1000},
                      Case{"1f1b", 2, 3, "balanced", 1, 1, "all", 0, "adamw", "1", 5},
                      Case{"gpipe", 2, 2, "balanced", 1, 1, "none", 0, "adamw", "5,7,4", 3}),
    case_name);

// Muon (hidden matrices by Muon, the rest by AdamW) and the error-feedback correction under
// sync schedules: 2 stages, data parallelism, interleaving, ZeRO-1 (error feedback only: it
// refuses Muon).
INSTANTIATE_TEST_SUITE_P(
    DelayRobust, PipelineExactness,
    ::testing::Values(Case{"gpipe", 2, 2, "balanced", 1, 1, "none", 0, "muon"},
                      Case{"1f1b", 2, 3, "balanced", 1, 1, "none", 0, "muon"},
                      Case{"1f1b", 2, 2, "balanced", 2, 1, "none", 0, "muon"},
                      Case{"interleaved", 2, 4, "balanced", 1, 2, "none", 0, "muon"},
                      Case{"1f1b", 2, 3, "balanced", 1, 1, "none", 0, "adamw", "1", 0, 3, "error_feedback"},
                      Case{"gpipe", 2, 2, "balanced", 1, 1, "none", 0, "muon", "1", 0, 3, "error_feedback"},
                      Case{"1f1b", 2, 2, "balanced", 2, 1, "none", 1, "adamw", "1", 0, 3, "error_feedback"}),
    case_name);

// The CNN (BatchNorm after every convolution) on tiny images: GPipe, 1F1B with an uneven
// partition, interleaved, recomputation (running statistics updated once per microbatch) and
// data parallelism (the reference takes the replicas' microbatches as its own); Muon on the
// kernels the model's default roles name (a 4-D kernel orthogonalised as [out, in * 3 * 3]).
INSTANTIATE_TEST_SUITE_P(
    Cnn, PipelineExactness,
    ::testing::Values(cnn_case(Case{"gpipe", 2, 2, "balanced"}), cnn_case(Case{"1f1b", 2, 3, "1,4"}),
                      cnn_case(Case{"interleaved", 2, 4, "balanced", 1, 2}),
                      cnn_case(Case{"1f1b", 2, 3, "balanced", 1, 1, "all"}),
                      cnn_case(Case{"gpipe", 2, 2, "balanced", 1, 1, "0"}),
                      cnn_case(Case{"1f1b", 2, 2, "balanced", 2}),
                      cnn_case(Case{"1f1b", 2, 3, "balanced", 1, 1, "none", 0, "muon"})),
    case_name);

// The RNN-T with ragged utterances, frame counts crossing every boundary: GPipe and 1F1B on 2
// and 3 stages (the last holding the predictor, joint and sample-wise loss), interleaved,
// recomputation and data parallelism; Muon on the matrices the transducer's roles name (its
// LSTM's and the joint's included); zero-bubble's split backward, whose B takes the sample-wise
// loss's enc and pred gradients and whose W its joint's (it ran the loss's backward twice, and
// the second found the gradients released: "backward can run once").
INSTANTIATE_TEST_SUITE_P(
    Transducer, PipelineExactness,
    ::testing::Values(transducer_case(Case{"gpipe", 2, 2, "balanced"}),
                      transducer_case(Case{"1f1b", 2, 3, "2,3"}),
                      transducer_case(Case{"gpipe", 3, 3, "1,2,2"}),
                      transducer_case(Case{"1f1b", 3, 2, "balanced"}),
                      transducer_case(Case{"interleaved", 2, 4, "balanced", 1, 2}),
                      transducer_case(Case{"1f1b", 2, 3, "balanced", 1, 1, "all"}),
                      transducer_case(Case{"1f1b", 2, 2, "balanced", 2}),
                      transducer_case(Case{"gpipe", 2, 2, "balanced", 1, 1, "none", 0, "muon"}),
                      transducer_case(Case{"zb-h1", 2, 3, "2,3"}),
                      transducer_case(Case{"zb-v", 2, 4, "balanced", 1, 2})),
    case_name);

}  // namespace
}  // namespace pipetrain
