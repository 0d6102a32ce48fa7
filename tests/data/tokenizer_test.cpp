#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "data/sha256.h"
#include "data/text_codec.h"
#include "data/token_file.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"
#include "../user_error.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir =
      fs::temp_directory_path() / fmt::format("pipetrain_tokenizer_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string shakespeare(size_t bytes) {
  return read_file(std::string(PIPETRAIN_SOURCE_DIR) + "/data/tinyshakespeare.txt")
      .substr(0, bytes);
}

// One small BPE tokenizer (800 pieces, trained on 60 kB of Shakespeare) shared by the tests.
struct SmallTokenizer {
  fs::path dir = fresh_dir("shared");
  std::string text_path = (dir / "text.txt").string();
  std::string model_path = (dir / "small.model").string();
  SmallTokenizer() {
    std::ofstream(text_path, std::ios::binary) << shakespeare(60000);
    TokenizerTrainOptions options;
    options.text_path = text_path;
    options.model_path = model_path;
    options.vocab_size = 800;
    train_tokenizer(options);
  }
  ~SmallTokenizer() { fs::remove_all(dir); }
};

const SmallTokenizer& small() {
  static const SmallTokenizer tokenizer;
  return tokenizer;
}

std::vector<int64_t> read_all(const std::string& path) {
  const TokenFile file(path);
  std::vector<int64_t> tokens(size_t(file.size()));
  file.copy(0, file.size(), tokens.data());
  return tokens;
}

TEST(Tokenizer, DecodesExactlyWhatItEncodes) {
  const Tokenizer tokenizer(small().model_path);
  EXPECT_EQ(tokenizer.vocab_size(), 800);
  const std::string verse = shakespeare(5000);
  const auto ids = tokenizer.encode(verse);
  EXPECT_EQ(tokenizer.decode(ids), verse);
  EXPECT_LT(ids.size(), verse.size() / 2) << ids.size();  // subword pieces, not bytes
  // Whitespace runs, leading spaces, tabs, blank lines and characters it never saw (bytes).
  const std::string odd = "  two  spaces\t\ttabs\n\n\n leading é ✓ 漢字 \r\n\x01 end ";
  EXPECT_EQ(tokenizer.decode(tokenizer.encode(odd)), odd);
  // Any cut of the ids decodes piece by piece: the pieces' texts add up to the text.
  EXPECT_EQ(tokenizer.decode({ids.begin(), ids.begin() + 100}) +
                tokenizer.decode({ids.begin() + 100, ids.end()}),
            verse);
}

TEST(Tokenizer, TrainingIsDeterministic) {
  const auto dir = fresh_dir("deterministic");
  for (const std::string type : {"bpe", "unigram"}) {
    TokenizerTrainOptions options;
    options.text_path = small().text_path;
    options.vocab_size = 800;
    options.type = type;
    options.model_path = (dir / "first.model").string();
    train_tokenizer(options);
    options.model_path = (dir / "second.model").string();
    train_tokenizer(options);
    EXPECT_EQ(sha256_hex_of_file((dir / "first.model").string()),
              sha256_hex_of_file((dir / "second.model").string()))
        << type;
  }
  // Sampled lines (SentencePiece's reservoir, its own fixed seed) are the same every time too.
  TokenizerTrainOptions sampled;
  sampled.text_path = small().text_path;
  sampled.vocab_size = 800;
  sampled.max_sentences = 800;
  sampled.model_path = (dir / "first.model").string();
  train_tokenizer(sampled);
  sampled.model_path = (dir / "second.model").string();
  train_tokenizer(sampled);
  EXPECT_EQ(sha256_hex_of_file((dir / "first.model").string()),
            sha256_hex_of_file((dir / "second.model").string()));
  EXPECT_NE(sha256_hex_of_file((dir / "first.model").string()),
            sha256_hex_of_file(small().model_path));
  fs::remove_all(dir);
}

TEST(Tokenizer, TokenizeWritesFilesThatHoldTheWholeTextsTokens) {
  const auto dir = fresh_dir("tokenize");
  const std::string text = shakespeare(200000);  // several 64 kB blocks
  std::ofstream(dir / "text.txt", std::ios::binary) << text;
  const Tokenizer tokenizer(small().model_path);
  int64_t calls = 0, last_done = 0;
  const TokenizeResult result =
      tokenize_text_file(tokenizer, {(dir / "text.txt").string(), (dir / "out").string(), 0.1},
                         [&](const TokenizeProgress& p) {
                           ++calls;
                           EXPECT_GT(p.bytes_done, last_done);
                           last_done = p.bytes_done;
                           EXPECT_EQ(p.bytes_total, int64_t(text.size()));
                         });
  EXPECT_GE(calls, 4);
  EXPECT_EQ(last_done, int64_t(text.size()));
  const auto train = read_all((dir / "out/train.bin").string());
  const auto val = read_all((dir / "out/val.bin").string());
  EXPECT_EQ(int64_t(train.size()), result.train_tokens);
  EXPECT_EQ(int64_t(val.size()), result.val_tokens);
  // Block by block is the same as the whole text at once.
  std::vector<int64_t> all = train;
  all.insert(all.end(), val.begin(), val.end());
  EXPECT_EQ(all, tokenizer.encode(text));
  // The validation split is the tail from the first safe cut at 90% of the bytes.
  const std::string val_text = tokenizer.decode(val);
  const size_t split = text.size() - val_text.size(), target = text.size() - text.size() / 10;
  EXPECT_EQ(tokenizer.decode(train) + val_text, text);
  EXPECT_TRUE(is_safe_cut(text, split));
  EXPECT_GE(split, target);
  for (size_t at = target; at < split; ++at) EXPECT_FALSE(is_safe_cut(text, at)) << at;
  const auto info = nlohmann::json::parse(read_file((dir / "out/tokens.json").string()));
  EXPECT_EQ(info["tokenizer"]["sha256"], sha256_hex_of_file(small().model_path));
  EXPECT_EQ(info["tokenizer"]["vocab_size"], 800);
  EXPECT_EQ(info["train"]["tokens"], result.train_tokens);
  EXPECT_EQ(info["source"]["bytes"], int64_t(text.size()));
  fs::remove_all(dir);
}

TEST(Tokenizer, BlocksEndOnlyAfterANewlineOrBeforeASpace) {
  EXPECT_TRUE(is_safe_cut("ab\ncd", 3));
  EXPECT_TRUE(is_safe_cut("ab cd", 2));
  EXPECT_FALSE(is_safe_cut("ab cd", 3));  // inside "▁cd"
  EXPECT_FALSE(is_safe_cut("abcd", 2));
  EXPECT_FALSE(is_safe_cut("ab ", 3));  // the next byte is not known yet
  EXPECT_TRUE(is_safe_cut("ab\n", 3));
}

TEST(Tokenizer, BadInputIsOneClearError) {
  const auto dir = fresh_dir("bad");
  std::ofstream(dir / "junk.model") << "not a model";
  EXPECT_NE(test::user_error_of([&] { Tokenizer((dir / "missing.model").string()); }).find("not found"),
            std::string::npos);
  EXPECT_NE(test::user_error_of([&] {
              Tokenizer((dir / "junk.model").string());
            }).find("is not a SentencePiece model"),
            std::string::npos);
  TokenizerTrainOptions options;
  options.text_path = small().text_path;
  options.model_path = (dir / "out.model").string();
  options.vocab_size = 100000;  // more pieces than 60 kB of text holds
  EXPECT_NE(test::user_error_of([&] { train_tokenizer(options); }).find("tokenizer training failed: "),
            std::string::npos)
      << test::user_error_of([&] { train_tokenizer(options); });
  options.vocab_size = 800;
  options.type = "wordpiece";
  EXPECT_NE(test::user_error_of([&] { train_tokenizer(options); }).find("must be bpe or unigram"),
            std::string::npos);
  options.type = "bpe";
  options.text_path = (dir / "missing.txt").string();
  EXPECT_NE(test::user_error_of([&] { train_tokenizer(options); }).find("not found"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "out.model"));
  std::ofstream(dir / "empty.txt");
  EXPECT_NE(test::user_error_of([&] {
              tokenize_text_file(Tokenizer(small().model_path),
                                 {(dir / "empty.txt").string(), (dir / "out").string(), 0.1},
                                 [](const TokenizeProgress&) {});
            }).find("is empty"),
            std::string::npos);
  fs::remove_all(dir);
}

TEST(TextCodec, EncodesThePromptAndDecodesSamplesAsTheDataSays) {
  DataConfig data;
  const auto bytes = make_text_codec(data, "");
  EXPECT_EQ(bytes->encode("AB"), (std::vector<int64_t>{65, 66}));
  EXPECT_EQ(bytes->sample_text("AB", {67, 10}), "ABC\n");
  data.format = "tokens";
  const auto ids = make_text_codec(data, "");
  EXPECT_TRUE(ids->encode("ROMEO:").empty());
  EXPECT_EQ(ids->sample_text("ROMEO:", {5, 399}),
            "(token ids: set data.tokenizer to decode them)\n5 399");
  data.tokenizer = small().model_path;
  const auto text = make_text_codec(data, "");
  const Tokenizer tokenizer(small().model_path);
  EXPECT_EQ(text->encode("ROMEO:"), tokenizer.encode("ROMEO:"));
  EXPECT_EQ(text->sample_text("ROMEO:", tokenizer.encode(" Good night.")), "ROMEO: Good night.");
  data.tokenizer = "missing.model";
  EXPECT_NE(test::user_error_of([&] {
              make_text_codec(data, "/nonexistent");
            }).find("tokenizer model 'missing.model' not found"),
            std::string::npos);
}

}  // namespace
}  // namespace pipetrain
