// The round trip as a user types it: text -> `pipetrain tokenizer train` -> `pipetrain tokenize`
// -> `pipetrain train` on the token files (one process and a 2-stage pipeline) -> a decoded
// sample; and the bad input of token files, one line each.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/files.h"
#include "../pipetrain_run.h"
#include "io/metrics.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

using Result = testing::ProcessResult;

Result run(const std::string& args) { return testing::run_pipetrain(args, "", 300); }

void expect_one_line_error(const std::string& args, const std::string& fragment) {
  testing::expect_one_line_error(args, fragment, 300);
}

// 100 kB of Shakespeare, a 500-piece BPE tokenizer and its token files, made once.
struct TokenFolder {
  fs::path dir = fs::temp_directory_path() / ("pipetrain_tokens_cli_" + std::to_string(::getpid()));
  std::string text = (dir / "text.txt").string();
  std::string model = (dir / "tok.model").string();
  std::string tokens = (dir / "tokens").string();
  Result trained, tokenized;
  TokenFolder() {
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(text, std::ios::binary)
        << read_file(std::string(PIPETRAIN_SOURCE_DIR) + "/data/tinyshakespeare.txt")
               .substr(0, 100000);
    trained = run("tokenizer train --vocab 500 " + text + " --out " + model);
    tokenized = run("tokenize --tokenizer " + model + " " + text + " --out " + tokens);
  }
  ~TokenFolder() { fs::remove_all(dir); }
};

const TokenFolder& folder() {
  static const TokenFolder made;
  return made;
}

std::string tiny_train(const std::string& run_dir) {
  return "train --data.format tokens --data.path " + folder().tokens + " --data.tokenizer " +
         folder().model +
         " --model.vocab_size 500 --model.layers 2 --model.d_model 16 "
         "--model.heads 2 --model.seq_len 16 --train.batch_size 4 --train.microbatches 2 "
         "--train.steps 3 --train.warmup_steps 1 --eval.every 0 --eval.batches 1 --log.every 1 "
         "--sample.tokens 30 --quiet --run-dir " +
         run_dir;
}

double first_loss(const fs::path& run_dir) {
  return read_metrics((run_dir / "metrics.jsonl").string()).at(0)["loss"].get<double>();
}

TEST(TokensCli, TextToTokenizerToTokenFilesToTrainingToADecodedSample) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.trained.exit_code, 0) << made.trained.output;
  EXPECT_NE(made.trained.output.find("vocabulary 500"), std::string::npos) << made.trained.output;
  ASSERT_EQ(made.tokenized.exit_code, 0) << made.tokenized.output;
  EXPECT_NE(made.tokenized.output.find("tokenize: 97.7 KiB of 97.7 KiB (100%)"), std::string::npos)
      << made.tokenized.output;  // the progress line
  for (const char* file : {"train.bin", "val.bin", "tokens.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(made.tokens) / file)) << file;
  }
  const fs::path one = made.dir / "one", two = made.dir / "two";
  const Result single = run(tiny_train(one.string()) + " --stages 1");
  ASSERT_EQ(single.exit_code, 0) << single.output;
  const Result pipeline = run(tiny_train(two.string()) + " --stages 2");
  ASSERT_EQ(pipeline.exit_code, 0) << pipeline.output;
  // The same batches reach both: the first losses agree (fp32, different summation order).
  EXPECT_NEAR(first_loss(one), first_loss(two), 1e-5 * first_loss(one));
  EXPECT_NEAR(first_loss(one), std::log(500.0), 0.5);  // an untrained model over 500 ids
  for (const auto& [result, dir] : {std::pair{single, one}, std::pair{pipeline, two}}) {
    EXPECT_NE(result.output.find("--- sample ---\nROMEO:"), std::string::npos) << result.output;
    const std::string sample = read_file((dir / "sample.txt").string());
    EXPECT_EQ(sample.rfind("ROMEO:", 0), 0u) << sample;
    EXPECT_EQ(sample.find("token ids"), std::string::npos) << sample;  // decoded text
    EXPECT_GT(sample.size(), 40u) << sample;  // 30 pieces of text, most longer than a byte
  }
  // Without a tokenizer the sample is printed as ids.
  const Result ids =
      run(tiny_train((made.dir / "ids").string()) + " --stages 1 --data.tokenizer ''");
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  EXPECT_NE(ids.output.find("(token ids: set data.tokenizer to decode them)"), std::string::npos)
      << ids.output;
}

TEST(TokensCli, BadTokenFilesAndTokenizersGetOneLine) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.tokenized.exit_code, 0) << made.tokenized.output;
  const std::string base = tiny_train((made.dir / "bad").string());
  expect_one_line_error(base + " --model.vocab_size 300",
                        "is outside the model's vocabulary "
                        "(model.vocab_size = 300); set model.vocab_size to at least 500");
  expect_one_line_error(base + " --stages 2 --model.vocab_size 300",
                        "is outside the model's vocabulary");
  expect_one_line_error(base + " --data.tokenizer " + (made.dir / "missing.model").string(),
                        "not found");
  // Another tokenizer (a different vocabulary) did not make these files.
  ASSERT_EQ(run("tokenizer train --vocab 400 " + made.text + " --out " +
                (made.dir / "other.model").string())
                .exit_code,
            0);
  expect_one_line_error(base + " --data.tokenizer " + (made.dir / "other.model").string(),
                        "did not make these token files");
  // Damaged files: a truncated body, a wrong magic.
  const fs::path damaged = made.dir / "damaged";
  fs::create_directories(damaged);
  fs::copy_file(fs::path(made.tokens) / "train.bin", damaged / "train.bin");
  fs::copy_file(fs::path(made.tokens) / "val.bin", damaged / "val.bin");
  fs::resize_file(damaged / "val.bin", fs::file_size(damaged / "val.bin") - 3);
  const std::string on_damaged = base + " --data.path " + damaged.string() + " --data.tokenizer ''";
  expect_one_line_error(on_damaged, "val.bin' is truncated");
  {
    std::fstream file(damaged / "train.bin", std::ios::binary | std::ios::in | std::ios::out);
    file.write("\x01\x02\x03\x04", 4);
  }
  expect_one_line_error(on_damaged + " --stages 2",
                        "train.bin' is not an llm.c token file: magic 67305985");
  expect_one_line_error(
      "tokenize --tokenizer " + (made.dir / "missing.model").string() + " " + made.text +
          " --out " + (made.dir / "out").string(),
      "tokenizer model '" + (made.dir / "missing.model").string() + "' not found");
  expect_one_line_error("tokenize --tokenizer " + made.model + " " + made.text,
                        "tokenize needs --out DIR");
  expect_one_line_error("tokenizer train --vocab 100000 " + made.text + " --out " +
                            (made.dir / "huge.model").string(),
                        "tokenizer training failed: ");
  expect_one_line_error("train --data.tokenizer tok.model", "data.tokenizer is for token files");
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

// An output that names an input (issue 35, item 8): `tokenizer train --out` on its own text, and
// `tokenize --out` on the folder holding the text as train.bin, would overwrite the text. Refused
// in one line, by file identity (a symbolic link to the text too), before anything is written.
TEST(TokensCli, AnOutputThatIsTheInputIsRefusedAndTheTextSurvives) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.trained.exit_code, 0) << made.trained.output;
  const fs::path dir = made.dir / "self";
  fs::create_directories(dir);
  const fs::path text = dir / "train.bin";  // a text that happens to carry the name
  fs::copy_file(made.text, text, fs::copy_options::overwrite_existing);
  const std::string before = read_file(text.string());
  expect_one_line_error("tokenizer train --vocab 500 " + text.string() + " --out " + text.string(),
                        "is the input text");
  const fs::path link = dir / "link.model";
  fs::create_symlink(text, link);
  expect_one_line_error("tokenizer train --vocab 500 " + text.string() + " --out " + link.string(),
                        "is the input text");
  expect_one_line_error("tokenize --tokenizer " + made.model + " " + text.string() + " --out " +
                            dir.string(), "is the input text");
  EXPECT_EQ(read_file(text.string()), before);
}

}  // namespace
}  // namespace pipetrain
