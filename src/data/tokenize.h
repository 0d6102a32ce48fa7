#pragma once
// `pipetrain tokenize`: a text file -> DIR/train.bin, DIR/val.bin (llm.c token files) and
// DIR/tokens.json (which tokenizer, data/token_set.h). The text is streamed in blocks, so its
// size is not bounded by memory; the tail (val_fraction of the bytes, from the next safe cut)
// is the validation split, as data.format = "bytes" holds out the tail. Blocks and the split
// end only where a piece cannot continue (is_safe_cut), so the files hold exactly the ids of
// encoding the whole text at once.
#include <cstdint>
#include <functional>
#include <string>

#include "data/tokenizer.h"

namespace pipetrain {

struct TokenizeOptions {
  std::string text_path;
  std::string out_dir;
  double val_fraction = 0.1;
};

struct TokenizeProgress {
  int64_t bytes_done = 0;
  int64_t bytes_total = 0;
  int64_t tokens = 0;
};

struct TokenizeResult {
  int64_t text_bytes = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
  int token_bytes = 2;  // 2 = uint16 files, 4 = uint32
};

// Calls `progress` after every block. UserError for a missing or empty text, an unwritable
// folder, or a split left without tokens. SIGINT/SIGTERM (with install_stop_handlers) stop it
// between blocks with StopRequested, nothing written; temporaries a killed tokenize left in the
// folder (NAME.tmp.PID of a process that is gone) are removed first.
TokenizeResult tokenize_text_file(const Tokenizer& tokenizer, const TokenizeOptions& options,
                                  const std::function<void(const TokenizeProgress&)>& progress);

// UserError naming the first byte of the file at `path` that is not UTF-8, with its offset and
// line: the tokenizer would replace such bytes with U+FFFD (training and encoding alike).
void refuse_invalid_utf8_text(const std::string& path);
// The train.bin/val.bin/tokens.json temporaries in `out_dir` whose writer is no longer running.
void remove_stale_token_temporaries(const std::string& out_dir);

// Where a block of text may end without changing how it is tokenized: after a newline or before
// a space. No piece spans either (pieces are learnt within lines, and a space only starts one).
bool is_safe_cut(std::string_view text, size_t at);

}  // namespace pipetrain
