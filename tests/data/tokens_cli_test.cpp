// The round trip as a user types it: text -> `pipetrain tokenizer train` -> `pipetrain tokenize`
// -> `pipetrain train` on the token files (one process and a 2-stage pipeline) -> a decoded
// sample; and the bad input of token files, one line each.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

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

// The names in `dir`, sorted.
std::vector<std::string> test_files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

double first_loss(const fs::path& run_dir) {
  return read_metrics((run_dir / "metrics.jsonl").string()).at(0)["loss"].get<double>();
}

TEST(TokensCli, TextToTokenizerToTokenFilesToTrainingToADecodedSample) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.trained.exit_code, 0) << made.trained.output;
  EXPECT_NE(made.trained.output.find("vocabulary 500"), std::string::npos) << made.trained.output;
  // Off a terminal, no line before SentencePiece's silent training: the log keeps the result.
  EXPECT_EQ(made.trained.output.find("tokenizer: training"), std::string::npos) << made.trained.output;
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
// On a terminal (script(1) gives it one), `tokenizer train` says what it trains while
// SentencePiece is silent (100000 bytes of text: 97.7 KiB), then erases that line for the result.
TEST(TokensCli, TokenizerTrainingSaysWhatRunsOnATerminal) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.trained.exit_code, 0) << made.trained.output;
  const std::string command = std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain tokenizer train --vocab 400 " +
                              made.text + " --out " + (made.dir / "on_terminal.model").string();
  // script(1) needs a pseudo-terminal; a machine without them cannot show a terminal.
  const int terminal = posix_openpt(O_RDWR | O_NOCTTY);
  if (terminal < 0) GTEST_SKIP() << "no pseudo-terminals here (posix_openpt failed)";
  close(terminal);
  const auto shown = testing::run_program("script", "-qec '" + command + "' /dev/null", "", 120);
  ASSERT_EQ(shown.exit_code, 0) << shown.output;
  const auto notice = shown.output.find("tokenizer: training a bpe vocabulary of 400 pieces on " + made.text +
                                        " (97.7 KiB) ...");
  ASSERT_NE(notice, std::string::npos) << shown.output;
  const auto erased = shown.output.find("\r\033[K", notice);
  ASSERT_NE(erased, std::string::npos) << shown.output;
  EXPECT_NE(shown.output.find("tokenizer: wrote ", erased), std::string::npos) << shown.output;
}

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
  // Someone's other file at --out is not replaced (a tokenizer model there would be: retraining).
  const fs::path notes = dir / "notes.txt";
  std::ofstream(notes) << "precious\n";
  expect_one_line_error("tokenizer train --vocab 500 " + text.string() + " --out " + notes.string(),
                        "exists and is not a SentencePiece model: not replacing it");
  EXPECT_EQ(read_file(notes.string()), "precious\n");
}

// Text that is not UTF-8 (here Latin-1's e-acute, a lone 0xE9, on line 3) is refused with its
// place, before anything is written: the tokenizer would have turned it into U+FFFD and the token
// files would not decode to the text (they did: exit 0, a lossy round trip). A multi-byte
// character across tokenize's 64 KiB read blocks is valid and passes.
TEST(TokensCli, TextThatIsNotUtf8IsRefusedWithItsPlace) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.trained.exit_code, 0) << made.trained.output;
  const fs::path dir = made.dir / "latin1";
  fs::create_directories(dir);
  const fs::path text = dir / "text.txt";
  std::ofstream(text, std::ios::binary) << "First line\nSecond line\nCaf\xE9 au lait\n" << std::string(2000, 'x') << "\n";
  expect_one_line_error("tokenize --tokenizer " + made.model + " " + text.string() + " --out " +
                            (dir / "tokens").string(), "is not valid UTF-8 at byte 26 (line 3)");
  EXPECT_FALSE(fs::exists(dir / "tokens" / "train.bin"));
  expect_one_line_error("tokenizer train --vocab 50 " + text.string() + " --out " + (dir / "t.model").string(),
                        "is not valid UTF-8 at byte 26 (line 3)");
  const fs::path straddling = dir / "straddling.txt";  // U+00E9 as 0xC3 0xA9 at bytes 65535-65536
  std::string words;
  for (int i = 0; i < 5000; ++i) words += "word ";
  std::ofstream(straddling, std::ios::binary) << std::string(65535, 'a') << "\xC3\xA9 b\n" << words << "\n";
  const auto ok = run("tokenize --tokenizer " + made.model + " " + straddling.string() + " --out " +
                      (dir / "straddling").string());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

// A tokenizer with more ids than model.vocab_size is refused before the run, not when the
// sample's prompt reaches an id without an embedding after the whole run ("internal error: index
// out of range in self", summary.json lost).
TEST(TokensCli, ATokenizerLargerThanTheModelsVocabularyIsRefusedUpFront) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.tokenized.exit_code, 0) << made.tokenized.output;
  // Token files whose tokens.json records a tokenizer of 600 ids, their ids all below 500.
  const fs::path tokens = made.dir / "larger_tokenizer";
  fs::copy(made.tokens, tokens, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  auto info = nlohmann::json::parse(read_file((tokens / "tokens.json").string()));
  info["tokenizer"]["vocab_size"] = 600;
  std::ofstream(tokens / "tokens.json") << info.dump();
  std::string args = tiny_train((made.dir / "small_vocab").string());
  args.replace(args.find("--data.path " + made.tokens), 12 + made.tokens.size(), "--data.path " + tokens.string());
  args.replace(args.find(" --data.tokenizer " + made.model), 18 + made.model.size(), "");
  expect_one_line_error(args, "says its tokenizer has 600 ids but model.vocab_size is 500");
}

// tokenize replaces train.bin, val.bin and tokens.json one by one: a folder holding the new
// train.bin and an older set's val.bin (a tokenize cut short between them, or a file copied
// in) passed the tokenizer check and trained. The counts tokens.json records must be the
// files'.
TEST(TokensCli, ATokenSetWhoseFilesDisagreeWithItsRecordIsRefused) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.tokenized.exit_code, 0) << made.tokenized.output;
  const fs::path half_text = made.dir / "half.txt", half = made.dir / "half_tokens", mixed = made.dir / "mixed_tokens";
  std::ofstream(half_text, std::ios::binary) << read_file(made.text).substr(0, 50000);
  ASSERT_EQ(run("tokenize --tokenizer " + made.model + " " + half_text.string() + " --out " + half.string()).exit_code, 0);
  fs::copy(made.tokens, mixed, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  fs::copy_file(half / "val.bin", mixed / "val.bin", fs::copy_options::overwrite_existing);
  std::string args = tiny_train((made.dir / "mixed_run").string());
  args.replace(args.find("--data.path " + made.tokens), 12 + made.tokens.size(), "--data.path " + mixed.string());
  expect_one_line_error(args, "the set is not the one it describes (a tokenize cut short, or files copied in)");
  EXPECT_EQ(run(tiny_train((made.dir / "whole_run").string())).exit_code, 0);  // the set as made
}

// A FIFO given as a data file used to hang the run in open() (no writer ever comes): token
// files, speech features and safetensors data are refused at once, as a device is.
TEST(TokensCli, AFifoAsADataFileIsRefusedNotWaitedOn) {
  const fs::path dir = folder().dir / "fifos";
  fs::create_directories(dir / "tokens");
  for (const auto& name : {"tokens/train.bin", "tokens/val.bin", "features.bin", "data.safetensors"}) {
    ASSERT_EQ(::mkfifo((dir / name).c_str(), 0600), 0) << name;
  }
  const std::string quick = " --train.steps 1 --quiet --run-dir " + (dir / "run").string();
  testing::expect_one_line_error("train --data.format tokens --data.path " + (dir / "tokens").string() + quick,
                                 "is not a token file (not a regular file)", 60);
  testing::expect_one_line_error("train --model.kind transducer --data.format speech --data.path " +
                                     (dir / "features.bin").string() + quick,
                                 "is not a regular file", 60);
  testing::expect_one_line_error("train --data.format safetensors --data.path " +
                                     (dir / "data.safetensors").string() + quick,
                                 "is not a regular file", 60);
}

// tokenize honours SIGINT even when started with it ignored (as `cmd &` in a script starts it):
// it used to run to the end. It stops between blocks, exits 130 and leaves no token file and
// no temporary. A temporary a killed tokenize left (its pid gone) is removed by the next one.
TEST(TokensCli, TokenizeStopsOnSigintAndLeavesNothing) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.trained.exit_code, 0) << made.trained.output;
  const fs::path dir = made.dir / "stopped";
  fs::create_directories(dir / "out");
  {  // 40 MB: several seconds of tokenizing
    std::ofstream big(dir / "big.txt", std::ios::binary);
    const std::string shakespeare = read_file(std::string(PIPETRAIN_SOURCE_DIR) + "/data/tinyshakespeare.txt");
    for (int i = 0; i < 36; ++i) big << shakespeare;
  }
  const std::string out = (dir / "out").string();
  // A temporary of a process that has ended (a shell that printed its pid and exited; any fixed
  // number could be a live pid where pid_max is large).
  const auto ended = testing::run_program("bash", "-c 'echo $$'", "", 30);
  const std::string dead_pid = ended.output.substr(0, ended.output.find('\n'));
  ASSERT_FALSE(dead_pid.empty()) << ended.output;
  std::ofstream(dir / "out" / ("train.bin.tmp." + dead_pid)) << "left by a killed tokenize";
  const std::string script =
      "( trap '' INT; exec " + std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain tokenize --tokenizer " +
      made.model + " " + (dir / "big.txt").string() + " --out " + out + " ) & pid=$!; "
      "while ! ls " + out + "/val.bin.tmp.* >/dev/null 2>&1; do sleep 0.05; done; "
      "kill -INT $pid; wait $pid; echo exit=$?";
  std::ofstream(dir / "stop.sh") << script << "\n";
  const auto run = testing::run_program("bash", (dir / "stop.sh").string(), "", 120);
  EXPECT_NE(run.output.find("exit=130"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("tokenize stopped by SIGINT; no token files written"), std::string::npos) << run.output;
  EXPECT_EQ(test_files_in(out), std::vector<std::string>{}) << run.output;
}

// A token file truncated while a run has it mapped (llm.c's scripts rewrite .bin files in place)
// killed the run with SIGBUS and no word. Now: one error line naming the cause, exit 2, in one
// process and through a pipeline's launcher.
TEST(TokensCli, ATokenFileTruncatedUnderTheRunIsOneLine) {
  const TokenFolder& made = folder();
  ASSERT_EQ(made.tokenized.exit_code, 0) << made.tokenized.output;
  for (const std::string stages : {"1", "2"}) {
    const fs::path dir = made.dir / ("shrunk" + stages);
    fs::create_directories(dir);
    fs::copy(made.tokens, dir / "tokens", fs::copy_options::recursive);
    std::string args = tiny_train((dir / "run").string());
    args.replace(args.find("--data.path " + made.tokens), 12 + made.tokens.size(),
                 "--data.path " + (dir / "tokens").string());
    args.replace(args.find("--train.steps 3"), 15, "--train.steps 1000000 --pipeline.stages " + stages);
    args.replace(args.find("--eval.every 0"), 14, "--eval.every 0 --log.every 1");
    const std::string script = std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain " + args +
                               " & pid=$!; while ! grep -q '\"step\":2' " + (dir / "run" / "metrics.jsonl").string() +
                               " 2>/dev/null; do sleep 0.05; done; truncate -s 1024 " +
                               (dir / "tokens" / "train.bin").string() + "; wait $pid; echo exit=$?";
    std::ofstream(dir / "shrink.sh") << script << "\n";
    const auto run = testing::run_program("bash", (dir / "shrink.sh").string(), "", 300);
    EXPECT_NE(run.output.find("exit=2"), std::string::npos) << stages << " stages: " << run.output;
    EXPECT_NE(run.output.find("a memory-mapped data file (token or speech feature file) shrank while the run read it"),
              std::string::npos) << stages << " stages: " << run.output;
  }
}

}  // namespace
}  // namespace pipetrain
