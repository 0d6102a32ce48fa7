#pragma once
// tokens.json, written by `pipetrain tokenize` beside train.bin and val.bin: which tokenizer made
// the token files (the SHA-256 of its .model file and its vocabulary size), from which text, and
// how it was split. A run given data.tokenizer refuses token files another tokenizer made.
// Token files from elsewhere (llm.c's scripts) have no tokens.json and are not checked.
#include <cstdint>
#include <optional>
#include <string>

namespace pipetrain {

constexpr const char* kTokenSetInfoFile = "tokens.json";

struct TokenSetInfo {
  std::string tokenizer_file;    // as given to `tokenize`
  std::string tokenizer_sha256;  // of the .model file's bytes (what sha256sum prints)
  int64_t vocab_size = 0;        // the tokenizer's
  std::string source_file;       // the text
  int64_t source_bytes = 0;
  double val_fraction = 0;
  int64_t train_tokens = 0;
  int64_t val_tokens = 0;
};

void write_token_set_info(const std::string& path, const TokenSetInfo& info);
// nullopt if the file does not exist; UserError if it is not a readable tokens.json.
std::optional<TokenSetInfo> read_token_set_info(const std::string& path);

// UserError if `tokenizer_path` is missing, or `info` records a different tokenizer.
void check_tokenizer_matches(const std::optional<TokenSetInfo>& info, const std::string& info_path,
                             const std::string& tokenizer_path);

}  // namespace pipetrain
