// `pipetrain tokenizer train` (a SentencePiece model from a text file) and `pipetrain tokenize`
// (a text file -> llm.c token files for data.format = "tokens"). See docs/data.md.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "core/stop_signal.h"
#include "data/sha256.h"
#include "data/tokenize.h"
#include "data/tokenizer.h"

namespace pipetrain::cli {
namespace {

using TokenizerClock = std::chrono::steady_clock;

double tokenizer_seconds_since(TokenizerClock::time_point start) {
  return std::chrono::duration<double>(TokenizerClock::now() - start).count();
}

// A text path as data.path is found: as given, else under the pipetrain source folder.
std::string resolve_text_file(const std::string& path) {
  if (path.empty()) fail("give the text file to read, e.g. data/tinyshakespeare.txt");
  const std::string found = resolve_existing_path(path, PIPETRAIN_SOURCE_DIR);
  regular_file_size(found, "text");  // a folder or a device is one error line
  return found;
}

// SentencePiece trains in one call that cannot be asked to stop: SIGINT and SIGTERM end the
// process at once (even when started with them ignored, as `cmd &` in a script does), after one
// line saying so. The model is written atomically after training, so nothing is left behind.
void end_tokenizer_training(int signal) {
  static const char interrupted[] = "pipetrain: tokenizer training stopped by SIGINT; nothing written\n";
  static const char terminated[] = "pipetrain: tokenizer training stopped by SIGTERM; nothing written\n";
  const bool is_int = signal == SIGINT;
  [[maybe_unused]] const auto written =
      ::write(STDERR_FILENO, is_int ? interrupted : terminated, is_int ? sizeof interrupted - 1 : sizeof terminated - 1);
  ::_exit(128 + signal);
}

// Replacing a tokenizer model is retraining it; anything else at --out is someone's file.
void refuse_replacing_other_files(const std::string& out) {
  if (!std::filesystem::exists(out)) return;
  try {
    const Tokenizer existing(out);
  } catch (const UserError&) {
    fail("--out {} exists and is not a SentencePiece model: not replacing it (choose another path)", out);
  }
}

void require_option(const std::string& value, const std::string& what) {
  if (value.empty()) fail("{}", what);
}

// "tokenize: 12.3 MiB of 1.0 GiB (12%), 3.2M tokens, 5.1 MiB/s, ETA 3m12s": in place on a
// terminal, otherwise one line per tenth of the text.
class TokenizeProgressLine {
 public:
  explicit TokenizeProgressLine(std::FILE* out) : out_(out), tty_(::isatty(::fileno(out)) != 0) {}
  void update(const TokenizeProgress& p) {
    const double seconds = std::max(tokenizer_seconds_since(start_), 1e-9);
    const double rate = double(p.bytes_done) / seconds;
    const int tenth = int(10 * p.bytes_done / std::max<int64_t>(p.bytes_total, 1));
    const std::string line =
        fmt::format("tokenize: {} of {} ({}%), {} tokens, {}/s, ETA {}",
                    format_bytes(double(p.bytes_done)), format_bytes(double(p.bytes_total)),
                    100 * p.bytes_done / std::max<int64_t>(p.bytes_total, 1),
                    format_count(double(p.tokens)), format_bytes(rate),
                    format_duration(double(p.bytes_total - p.bytes_done) / std::max(rate, 1.0)));
    if (tty_) {
      fmt::print(out_, "\r\033[K{}", line);
    } else if (tenth > last_tenth_) {
      fmt::print(out_, "{}\n", line);
      last_tenth_ = tenth;
    }
    std::fflush(out_);
  }
  ~TokenizeProgressLine() {
    if (tty_) fmt::print(out_, "\n");
  }

 private:
  std::FILE* out_;
  bool tty_;
  int last_tenth_ = 0;
  TokenizerClock::time_point start_ = TokenizerClock::now();
};

// SentencePiece reports nothing while it trains (its log is off: errors come back as a status):
// on a terminal, a line says what runs until it ends, then gives way to the result or the error
// (a log keeps only those: one line either way).
class TrainingNotice {
 public:
  explicit TrainingNotice(const std::string& line) : tty_(::isatty(STDERR_FILENO) != 0) {
    if (!tty_) return;
    fmt::print(stderr, "{} ...", line);
    std::fflush(stderr);
  }
  ~TrainingNotice() {
    if (!tty_) return;
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
  }
  TrainingNotice(const TrainingNotice&) = delete;
  TrainingNotice& operator=(const TrainingNotice&) = delete;

 private:
  bool tty_;
};

void add_tokenizer_train(CLI::App& parent) {
  auto* cmd = parent.add_subcommand("train", "Train a SentencePiece tokenizer on a text file");
  auto options = std::make_shared<TokenizerTrainOptions>();
  auto text = std::make_shared<std::string>();
  cmd->add_option("text", *text, "the text file (UTF-8), e.g. data/tinyshakespeare.txt");
  cmd->add_option("--out", options->model_path, "the .model file to write");
  cmd->add_option("--vocab", options->vocab_size, "vocabulary size")->capture_default_str();
  cmd->add_option("--type", options->type, "bpe | unigram")->capture_default_str();
  cmd->add_option("--max-sentences", options->max_sentences,
                  "lines sampled for training (SentencePiece's fixed seed); 0 = all")
      ->capture_default_str();
  cmd->add_option("--threads", options->threads,
                  "SentencePiece training threads (a unigram model depends on the count)")
      ->capture_default_str();
  cmd->callback([options, text] {
    require_option(options->model_path, "tokenizer train needs --out FILE.model");
    if (options->vocab_size < 1 || options->threads < 1 || options->max_sentences < 0) {
      fail("--vocab and --threads must be >= 1, --max-sentences >= 0");
    }
    if (options->max_sentences > 0 && options->max_sentences <= 100) {  // SentencePiece's own bound
      fail("--max-sentences must be 0 (all lines) or more than 100, got {}", options->max_sentences);
    }
    options->text_path = resolve_text_file(*text);
    refuse_writing_over_input(options->model_path, options->text_path, "--out");
    refuse_replacing_other_files(options->model_path);
    refuse_invalid_utf8_text(options->text_path);
    std::signal(SIGINT, end_tokenizer_training);
    std::signal(SIGTERM, end_tokenizer_training);
    const auto start = TokenizerClock::now();
    {
      const TrainingNotice notice(fmt::format(
          "tokenizer: training a {} vocabulary of {} pieces on {} ({}{})", options->type, options->vocab_size,
          options->text_path, format_bytes(double(std::filesystem::file_size(options->text_path))),
          options->max_sentences > 0 ? fmt::format(", {} lines sampled", options->max_sentences) : ""));
      train_tokenizer(*options);
    }
    const Tokenizer tokenizer(options->model_path);
    fmt::print("tokenizer: wrote {} ({}, vocabulary {}, sha256 {}) from {} in {:.1f} s\n",
               options->model_path, options->type, tokenizer.vocab_size(),
               sha256_hex_of_file(options->model_path), options->text_path,
               tokenizer_seconds_since(start));
  });
}

}  // namespace

void add_tokenizer_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "SentencePiece tokenizers (see docs/data.md)");
  add_tokenizer_train(*cmd);
  cmd->callback([cmd] {  // one line and exit 2, as every user error (CLI11 would exit 106)
    if (cmd->get_subcommands().empty()) fail("pipetrain tokenizer needs a subcommand: train");
  });
}

void add_tokenize_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "tokenize", "Tokenize a text file into llm.c token files DIR/train.bin, DIR/val.bin");
  auto options = std::make_shared<TokenizeOptions>();
  options->val_fraction = DataConfig().val_fraction;
  auto text = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  cmd->add_option("text", *text, "the text file (UTF-8)");
  cmd->add_option("--tokenizer", *model, "the SentencePiece .model (`pipetrain tokenizer train`)");
  cmd->add_option("--out", options->out_dir, "the folder to write");
  cmd->add_option("--val-fraction", options->val_fraction,
                  "the text's tail held out for validation (data.val_fraction)")
      ->capture_default_str();
  cmd->callback([options, text, model] {
    require_option(*model,
                   "tokenize needs --tokenizer FILE.model (from `pipetrain tokenizer train`)");
    require_option(options->out_dir, "tokenize needs --out DIR");
    if (!(options->val_fraction > 0 && options->val_fraction < 1)) {
      fail("--val-fraction must be between 0 and 1 (exclusive), got {:g}", options->val_fraction);
    }
    options->text_path = resolve_text_file(*text);
    for (const char* written : {"train.bin", "val.bin", "tokens.json"}) {
      refuse_writing_over_input((std::filesystem::path(options->out_dir) / written).string(),
                                options->text_path, "--out");
    }
    const Tokenizer tokenizer(*model);
    install_stop_handlers();  // a stop between blocks, with the writers' temporaries removed
    TokenizeResult result;
    {
      TokenizeProgressLine progress(stderr);
      result = tokenize_text_file(tokenizer, *options,
                                  [&](const TokenizeProgress& p) { progress.update(p); });
    }
    const std::filesystem::path dir(options->out_dir);
    const int64_t tokens = result.train_tokens + result.val_tokens;
    fmt::print(
        "tokenize: wrote {} ({} tokens) and {} ({} tokens), uint{}, {:.2f} bytes of text "
        "per token; {} records tokenizer {} (vocabulary {})\n",
        (dir / "train.bin").string(), result.train_tokens, (dir / "val.bin").string(),
        result.val_tokens, 8 * result.token_bytes, double(result.text_bytes) / double(tokens),
        (dir / "tokens.json").string(), *model, tokenizer.vocab_size());
  });
}

}  // namespace pipetrain::cli
