#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "core/config.h"
#include "core/error.h"
#include "data/sha256.h"
#include "data/text_dataset.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "data/token_set.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir =
      fs::temp_directory_path() / fmt::format("pipetrain_token_dataset_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string random_bytes(size_t size) {
  std::mt19937 rng(42);
  std::string text(size, '\0');
  for (auto& c : text) c = char(rng() % 256);
  return text;
}

std::vector<int64_t> tokens_of(const std::string& bytes) {
  std::vector<int64_t> tokens;
  for (char c : bytes) tokens.push_back(uint8_t(c));
  return tokens;
}

// Token files holding a text's bytes, split where TextDataset splits them.
void write_split(const fs::path& dir, const std::string& text, double val_fraction,
                 int token_bytes) {
  const auto val_size = size_t(double(text.size()) * val_fraction);
  const size_t train_size = text.size() - val_size;
  write_token_file((dir / "train.bin").string(), tokens_of(text.substr(0, train_size)),
                   token_bytes);
  write_token_file((dir / "val.bin").string(), tokens_of(text.substr(train_size)), token_bytes);
}

Config token_config(const fs::path& path, int64_t seq_len, int64_t vocab_size) {
  Config config;
  config.data.format = "tokens";
  config.data.path = path.string();
  config.model.seq_len = seq_len;
  config.model.vocab_size = vocab_size;
  return config;
}

std::string error_of(const Config& config) {
  try {
    make_dataset(config, "/nonexistent-root");
  } catch (const UserError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TokenDataset, DrawsTheSameBatchesAsTextDatasetFromTheSameTokens) {
  const auto dir = fresh_dir("same");
  const std::string text = random_bytes(6000);
  for (int token_bytes : {2, 4}) {
    write_split(dir, text, 0.1, token_bytes);
    const auto bytes = TextDataset::from_text(text, 0.1, 16);
    const TokenDataset tokens(token_set_paths(dir.string()), 16);
    ASSERT_EQ(tokens.train_tokens(), bytes.train_tokens());
    ASSERT_EQ(tokens.val_tokens(), bytes.val_tokens());
    for (int64_t step : {0, 1, 17, 1000}) {
      const TokenBatch a = bytes.train_batch(1234, step, 8), b = tokens.train_batch(1234, step, 8);
      EXPECT_EQ(a.inputs, b.inputs) << "step " << step;
      EXPECT_EQ(a.targets, b.targets) << "step " << step;
      EXPECT_EQ(b.batch_size, 8);
      EXPECT_EQ(b.seq_len, 16);
    }
    for (int64_t index : {0, 3}) {
      EXPECT_EQ(bytes.val_batch(index, 4).inputs, tokens.val_batch(index, 4).inputs);
      EXPECT_EQ(bytes.val_batch(index, 4).targets, tokens.val_batch(index, 4).targets);
    }
  }
  fs::remove_all(dir);
}

TEST(TokenDataset, MakeDatasetOpensAFolderOrLlmcNamedFiles) {
  const auto dir = fresh_dir("paths");
  const std::string text = random_bytes(3000);
  write_split(dir, text, 0.1, 2);
  EXPECT_EQ(make_dataset(token_config(dir, 8, 256), "")->train_tokens(), 2700);
  fs::rename(dir / "train.bin", dir / "tiny_shakespeare_train.bin");
  fs::rename(dir / "val.bin", dir / "tiny_shakespeare_val.bin");
  const auto llmc = make_dataset(token_config(dir / "tiny_shakespeare_train.bin", 8, 256), "");
  EXPECT_EQ(llmc->train_tokens(), 2700);
  EXPECT_EQ(llmc->val_tokens(), 300);
  EXPECT_NE(error_of(token_config(dir / "tiny_shakespeare_val.bin", 8, 256))
                .find("whose name contains 'train'"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(TokenDataset, RefusesIdsOutsideTheVocabularyNamingTheFileAndTheId) {
  const auto dir = fresh_dir("vocab");
  write_token_file((dir / "train.bin").string(), std::vector<int64_t>(100, 5), 2);
  std::vector<int64_t> val(100, 3);
  val[50] = 8191;
  write_token_file((dir / "val.bin").string(), val, 2);
  const std::string message = error_of(token_config(dir, 8, 256));
  EXPECT_NE(message.find("val.bin: token id 8191 is outside the model's vocabulary "
                         "(model.vocab_size = 256); set model.vocab_size to at least 8192"),
            std::string::npos)
      << message;
  EXPECT_EQ(make_dataset(token_config(dir, 8, 8192), "")->val_tokens(), 100);
  // With a tokens.json the message names the tokenizer's vocabulary.
  TokenSetInfo info;
  info.vocab_size = 8200;
  info.train_tokens = info.val_tokens = 100;
  write_token_set_info((dir / "tokens.json").string(), info);
  EXPECT_NE(error_of(token_config(dir, 8, 300))
                .find("at least 8200 (the tokenizer's vocabulary is 8200)"),
            std::string::npos)
      << error_of(token_config(dir, 8, 300));
  fs::remove_all(dir);
}

TEST(TokenDataset, RefusesATokenizerThatDidNotMakeTheFilesOrIsMissing) {
  const auto dir = fresh_dir("tokenizer");
  write_token_file((dir / "train.bin").string(), std::vector<int64_t>(100, 5), 2);
  write_token_file((dir / "val.bin").string(), std::vector<int64_t>(100, 5), 2);
  std::ofstream(dir / "a.model") << "model a";
  std::ofstream(dir / "b.model") << "model b";
  TokenSetInfo info;
  info.tokenizer_file = "a.model";
  info.tokenizer_sha256 = sha256_hex_of_file((dir / "a.model").string());
  info.vocab_size = 300;
  info.train_tokens = info.val_tokens = 100;
  write_token_set_info((dir / "tokens.json").string(), info);
  Config config = token_config(dir, 8, 300);
  config.data.tokenizer = (dir / "a.model").string();
  EXPECT_EQ(make_dataset(config, "")->train_tokens(), 100);
  // The counts it records must be the files' (tokenize replaces the three files one by one).
  info.val_tokens = 99;
  write_token_set_info((dir / "tokens.json").string(), info);
  EXPECT_NE(error_of(config).find("records 100 training and 99 validation tokens, but the files hold 100 and 100"),
            std::string::npos) << error_of(config);
  info.val_tokens = 100;
  write_token_set_info((dir / "tokens.json").string(), info);
  config.data.tokenizer = (dir / "b.model").string();
  EXPECT_NE(error_of(config).find("did not make these token files"), std::string::npos)
      << error_of(config);
  config.data.tokenizer = (dir / "missing.model").string();
  EXPECT_NE(
      error_of(config).find("tokenizer model '" + (dir / "missing.model").string() + "' not found"),
      std::string::npos)
      << error_of(config);
  fs::remove_all(dir);
}

TEST(TokenDataset, RefusesSplitsShorterThanAWindow) {
  const auto dir = fresh_dir("short");
  write_token_file((dir / "train.bin").string(), std::vector<int64_t>(100, 5), 2);
  write_token_file((dir / "val.bin").string(), std::vector<int64_t>(16, 5), 2);
  EXPECT_NE(error_of(token_config(dir, 16, 256))
                .find("val.bin: 16 tokens are too few for sequences of 16 tokens"),
            std::string::npos)
      << error_of(token_config(dir, 16, 256));
  EXPECT_NE(error_of(token_config(dir / "nothing", 16, 256)).find("not found"), std::string::npos);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
