// pipetrain's Hugging Face import and export against transformers itself (tests/hf/hf_oracle.py
// builds tiny random GPT-2 and Llama models with it, in float64): logits after import, one
// AdamW step on 2 pipeline stages against torch.optim.AdamW in one process, and from_pretrained
// of what `pipetrain export` wrote. Float64, 1e-9 relative.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/files.h"
#include "hf/hf_config.h"
#include "io/safetensors.h"
#include "model/gpt.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// The models and data hf_oracle.py makes, once for the whole suite.
const fs::path& oracle_dir() {
  static const fs::path dir = [] {
    const fs::path made = testing::fresh_dir("hf_oracle");
    fs::create_directories(made);
    const auto run = testing::run_program(
        PIPETRAIN_PYTHON, std::string(PIPETRAIN_SOURCE_DIR) + "/tests/hf/hf_oracle.py make " + made.string(), "", 300);
    EXPECT_EQ(run.exit_code, 0) << run.output;
    return made;
  }();
  return dir;
}

torch::Tensor tensor_in(const fs::path& file, const std::string& name) {
  for (const auto& entry : decode_safetensors(read_file(file.string()), file.string())) {
    if (entry.name == name) return from_entry(entry);
  }
  ADD_FAILURE() << file << " holds no " << name;
  return {};
}

double relative_difference(const torch::Tensor& ours, const torch::Tensor& theirs) {
  return ((ours - theirs).abs().max() / theirs.abs().max()).item<double>();
}

Config imported_config(const std::string& name) {
  Config config;
  config.model.init_from = (oracle_dir() / name).string();
  config.model.dtype = "float64";
  config.model.seq_len = 16;
  config.data.format = "safetensors";
  hf::apply_init_from(config, {});
  validate(config);
  return config;
}

class HfModels : public ::testing::TestWithParam<std::string> {};

TEST_P(HfModels, ImportedLogitsEqualTransformersInFloat64) {
  const Config config = imported_config(GetParam());
  auto whole = std::dynamic_pointer_cast<GptStack>(make_model(config)->make_whole());
  ASSERT_NE(whole, nullptr);
  torch::NoGradGuard no_grad;
  const auto tokens = tensor_in(oracle_dir() / "data.safetensors", "train_inputs");
  const auto expected = tensor_in(oracle_dir() / (GetParam() + ".logits.safetensors"), "logits");
  const auto logits = whole->logits(tokens);
  ASSERT_EQ(logits.sizes(), expected.sizes());
  EXPECT_LT(relative_difference(logits, expected), 1e-9);
}

// One AdamW step of `init_from` on 2 pipeline stages (float64) into `run`.
testing::ProcessResult train_one_step(const std::string& init_from, const fs::path& run) {
  const std::string data = (oracle_dir() / "data.safetensors").string();
  return testing::run_pipetrain(
      "train --model.init_from " + init_from + " --model.dtype float64 --model.seq_len 16"
      " --data.format safetensors --data.path " + data +
      " --train.batch_size 4 --train.microbatches 2 --pipeline.stages 2 --train.steps 1"
      " --train.optimizer adamw --train.lr 1e-2 --train.min_lr 1e-2 --train.warmup_steps 0"
      " --train.beta1 0.9 --train.beta2 0.99 --train.eps 1e-8 --train.weight_decay 0.01"
      " --train.grad_clip 0 --eval.every 0 --sample.tokens 0 --quiet --run-dir " + run.string());
}

double first_step_loss(const fs::path& run) {
  std::ifstream metrics(run / "metrics.jsonl");
  std::string line;
  std::getline(metrics, line);
  return nlohmann::json::parse(line)["loss"].get<double>();
}

// Then the export (sharded: many small files and their index) loads in transformers with the
// weights torch.optim.AdamW gives, and its shards, imported on 2 stages again (each worker
// reading its own layers' tensors), start where transformers' step ended.
TEST_P(HfModels, ImportedModelTrainedOnTwoStagesAndExportedEqualsTransformersAdamwStep) {
  const fs::path run = testing::fresh_dir("hf_step_" + GetParam());
  const fs::path exported = testing::fresh_dir("hf_export_" + GetParam());
  const fs::path again = testing::fresh_dir("hf_again_" + GetParam());
  const auto train = train_one_step((oracle_dir() / GetParam()).string(), run);
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const auto out = testing::run_pipetrain("export --run-dir " + run.string() +
                                          " --format hf --dtype float64 --shard-mb 0.02 --out " + exported.string());
  ASSERT_EQ(out.exit_code, 0) << out.output;
  EXPECT_TRUE(fs::exists(exported / "model.safetensors.index.json")) << out.output;
  const auto step = testing::run_program(
      PIPETRAIN_PYTHON, std::string(PIPETRAIN_SOURCE_DIR) + "/tests/hf/hf_oracle.py step " +
                            oracle_dir().string() + " " + GetParam() + " " + exported.string(), "", 300);
  ASSERT_EQ(step.exit_code, 0) << step.output;
  const auto result = nlohmann::json::parse(step.output.substr(step.output.rfind('{')));
  EXPECT_TRUE(result["missing"].empty()) << result.dump();
  EXPECT_GT(result["weights"].get<int>(), 5);
  EXPECT_LT(result["max_weight_error"].get<double>(), 1e-9) << result.dump();
  EXPECT_LT(result["logit_error"].get<double>(), 1e-9) << result.dump();
  const double loss = result["loss"].get<double>(), next_loss = result["next_loss"].get<double>();
  EXPECT_NEAR(first_step_loss(run), loss, 1e-9 * loss);
  const auto resumed = train_one_step(exported.string(), again);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NEAR(first_step_loss(again), next_loss, 1e-9 * next_loss);
  EXPECT_GT(std::abs(next_loss - loss), 1e-3);  // the step changed the model
  for (const auto& dir : {run, exported, again}) fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Transformers, HfModels,
                         ::testing::Values("gpt2", "llama", "llama_tied_scaled"));

// A copy of oracle model `name` whose config.json field `key` is `value` (null removes it).
fs::path edited_copy(const std::string& name, const std::string& key, const nlohmann::json& value) {
  const fs::path copy = testing::fresh_dir("hf_edited_" + name + "_" + key);
  fs::copy(oracle_dir() / name, copy, fs::copy_options::recursive);
  auto config = nlohmann::json::parse(read_file((copy / "config.json").string()));
  if (value.is_null()) config.erase(key); else config[key] = value;
  std::ofstream(copy / "config.json") << config.dump();
  return copy;
}

// Bad input is one line (exit 2) naming what is wrong, before any training.
TEST(HfBadInput, EachIsOneLineNamingTheProblem) {
  const std::string train = "train --model.seq_len 16 --pipeline.stages 1 --train.steps 1 --data.format "
                            "safetensors --data.path " + (oracle_dir() / "data.safetensors").string() +
                            " --model.init_from ";
  const std::string llama = (oracle_dir() / "llama").string();
  testing::expect_one_line_error(train + "/nonexistent/folder", "is not a folder");
  const auto mistral = edited_copy("llama", "model_type", "mistral");
  testing::expect_one_line_error(train + mistral.string(), "model_type 'mistral'");
  const auto no_weights = edited_copy("llama", "vocab_size", 40);
  fs::remove(no_weights / "model.safetensors");
  testing::expect_one_line_error(train + no_weights.string(), "holds neither model.safetensors");
  testing::expect_one_line_error(train + llama + " --model.layers 5",
                                 "model.layers = 5 is given beside model.init_from");
  // At its default value too (it was taken for not given, and the import's 2 layers trained).
  testing::expect_one_line_error(train + llama + " --model.layers 4",
                                 "model.layers = 4 is given beside model.init_from");
  const auto wider = edited_copy("llama", "intermediate_size", 50);
  testing::expect_one_line_error(train + wider.string(), "down_proj.weight' of '" + wider.string() + "' is [32, 48] but the model needs [32, 50]");
  const auto deeper = edited_copy("llama", "num_hidden_layers", 4);
  testing::expect_one_line_error(train + deeper.string(), "has no tensor 'model.layers.3.");
  const auto biased = edited_copy("llama", "attention_bias", true);
  testing::expect_one_line_error(train + biased.string(), "attention_bias = true is not supported");
  for (const auto& dir : {mistral, no_weights, wider, deeper, biased}) fs::remove_all(dir);
}

TEST(HfBadInput, ExportRefusesAnotherFormatAFolderWithFilesAndAModelWithoutAHfForm) {
  const fs::path run = testing::fresh_dir("hf_export_refusals");
  const auto trained = testing::run_pipetrain(
      "train --model.layers 1 --model.d_model 16 --model.seq_len 16 --pipeline.stages 1"
      " --train.steps 1 --train.batch_size 2 --train.microbatches 1 --eval.every 0"
      " --sample.tokens 0 --quiet --run-dir " + run.string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string exporting = "export --run-dir " + run.string();
  testing::expect_one_line_error(exporting + " --format onnx --out /tmp/x", "--format must be hf");
  testing::expect_one_line_error(exporting + " --format hf", "export needs --out");
  testing::expect_one_line_error(exporting + " --format hf --out " + run.string(), "already holds files");
  testing::expect_one_line_error(exporting + " --format hf --dtype int8 --out " + (run / "x").string(),
                                 "--dtype must be float32");
  testing::expect_one_line_error("export --run-dir /nonexistent --format hf --out /tmp/x", "does not exist");
  // The run's checkpoint read as another model than it trained (it used to export a config.json
  // with the overrides' activation and epsilon beside the run's weights).
  testing::expect_one_line_error(exporting + " --format hf --model.activation gelu_tanh --out " + (run / "y").string(),
                                 "its weights were trained as another model than this config describes: "
                                 "model.activation = gelu_tanh (the checkpoint's: gelu)");
  // A shape the checkpoint's tensors would reject is named as the setting that changed it.
  testing::expect_one_line_error(exporting + " --format hf --model.ffn_hidden 32 --out " + (run / "y").string(),
                                 "model.ffn_hidden = 32 (the checkpoint's: 64)");
  EXPECT_FALSE(fs::exists(run / "y"));
  // Written whole or not at all: an interrupted export's OUT.partial (marked) is cleared by the
  // next export, which then renames its own into place; a foreign OUT.partial is left alone.
  const fs::path out = run / "hf";
  fs::create_directories(out.string() + ".partial");
  testing::expect_one_line_error(exporting + " --format hf --out " + out.string(),
                                 "hf.partial' exists and is not an interrupted export's; move it away");
  std::ofstream(out.string() + ".partial/.pipetrain-export-in-progress") << "";
  std::ofstream(out.string() + ".partial/model-00001-of-00002.safetensors.tmp.1") << "half";
  const auto exported = testing::run_pipetrain(exporting + " --format hf --out " + out.string());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  EXPECT_FALSE(fs::exists(out.string() + ".partial"));
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(out)) files.insert(entry.path().filename().string());
  EXPECT_EQ(files, (std::set<std::string>{"config.json", "model.safetensors"}));
  fs::remove_all(run);
}

}  // namespace
}  // namespace pipetrain
