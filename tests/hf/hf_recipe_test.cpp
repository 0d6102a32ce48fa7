// docs/models.md's fine-tuning recipe end to end, on a tiny model: transformers creates a Llama
// and its tokenizer (scripts/make_tiny_hf_model.py), the tokenizer writes the token files
// (scripts/hf_tokenize.py), pipetrain fine-tunes on 2 stages, exports (the tokenizer goes
// along), and transformers loads the export, tokenizer and all, and generates
// (scripts/hf_generate.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

testing::ProcessResult python(const std::string& script, const std::string& args) {
  return testing::run_program(PIPETRAIN_PYTHON,
                              std::string(PIPETRAIN_SOURCE_DIR) + "/scripts/" + script + " " + args, "", 300);
}

std::vector<double> validation_losses(const fs::path& run) {
  std::ifstream metrics(run / "metrics.jsonl");
  std::vector<double> losses;
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("val_loss")) losses.push_back(record["val_loss"].get<double>());
  }
  return losses;
}

TEST(HfRecipe, FineTuneATransformersLlamaOnTwoStagesExportItAndGenerateInTransformers) {
  const fs::path dir = testing::fresh_dir("hf_recipe");
  fs::create_directories(dir);
  {  // 60 KB of Shakespeare: the tokenizer's and the fine-tuning's text
    std::ifstream all(std::string(PIPETRAIN_SOURCE_DIR) + "/data/tinyshakespeare.txt");
    std::string text(60000, '\0');
    all.read(text.data(), std::streamsize(text.size()));
    std::ofstream(dir / "text.txt") << text;
  }
  const std::string model = (dir / "model").string(), tokens = (dir / "tokens").string();
  auto made = python("make_tiny_hf_model.py", "--out " + model + " --text " + (dir / "text.txt").string());
  ASSERT_EQ(made.exit_code, 0) << made.output;
  auto tokenized = python("hf_tokenize.py", "--tokenizer " + model + " --text " +
                                                (dir / "text.txt").string() + " --out " + tokens);
  ASSERT_EQ(tokenized.exit_code, 0) << tokenized.output;

  const fs::path run = dir / "run";
  const auto train = testing::run_pipetrain(
      "train --model.init_from " + model + " --data.format tokens --data.path " + tokens +
      " --model.seq_len 64 --pipeline.stages 2 --train.steps 60 --train.batch_size 16"
      " --train.microbatches 4 --eval.every 30 --sample.tokens 0 --quiet --run-dir " + run.string());
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const auto losses = validation_losses(run);
  ASSERT_EQ(losses.size(), 2u);
  // The first validation (step 30) is already well below the random model's ln(512) = 6.24.
  EXPECT_LT(losses[0], 5.5);
  EXPECT_LT(losses[1], losses[0]);

  const fs::path exported = dir / "exported";
  const auto out = testing::run_pipetrain("export --run-dir " + run.string() + " --format hf --out " +
                                          exported.string());
  ASSERT_EQ(out.exit_code, 0) << out.output;
  // The tokenizer's end-of-text id goes with the weights (transformers' default would be 2).
  const auto started = nlohmann::json::parse(read_file(model + "/config.json"));
  const auto written = nlohmann::json::parse(read_file((exported / "config.json").string()));
  ASSERT_TRUE(started.at("eos_token_id").is_number_integer()) << started.dump();
  EXPECT_EQ(written.at("eos_token_id"), started.at("eos_token_id"));
  EXPECT_EQ(written.at("bos_token_id"), started.at("bos_token_id"));
  // The tokenizer and generation files go along, as they were: the export is one folder.
  int companions = 0;
  for (const auto& entry : fs::directory_iterator(model)) {
    const std::string name = entry.path().filename().string();
    if (name == "config.json" || entry.path().extension() == ".safetensors") continue;
    ++companions;
    ASSERT_TRUE(fs::exists(exported / name)) << name << "\n" << out.output;
    EXPECT_EQ(read_file((exported / name).string()), read_file(entry.path().string())) << name;
  }
  EXPECT_TRUE(fs::exists(exported / "tokenizer.json"));
  EXPECT_TRUE(fs::exists(exported / "generation_config.json"));
  EXPECT_GE(companions, 3);  // tokenizer.json, tokenizer_config.json, generation_config.json
  const auto generated = python("hf_generate.py", "--model " + exported.string() + " --prompt ROMEO: --tokens 20");
  ASSERT_EQ(generated.exit_code, 0) << generated.output;
  const auto text_start = generated.output.find("ROMEO:");
  ASSERT_NE(text_start, std::string::npos) << generated.output;
  EXPECT_GT(generated.output.size() - text_start, std::string("ROMEO:").size() + 10) << generated.output;

  // With the starting folder gone, the export still goes ahead and says what it could not keep.
  fs::rename(model, dir / "moved");
  const auto without = testing::run_pipetrain("export --run-dir " + run.string() + " --format hf --out " +
                                              (dir / "exported_again").string());
  ASSERT_EQ(without.exit_code, 0) << without.output;
  EXPECT_NE(without.output.find("which is gone: its special-token ids (bos, eos) are not in the export's "
                                "config.json, nor its tokenizer files beside it"), std::string::npos)
      << without.output;
  EXPECT_FALSE(fs::exists(dir / "exported_again" / "tokenizer.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
