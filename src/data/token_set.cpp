#include "data/token_set.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "data/sha256.h"

namespace pipetrain {

void write_token_set_info(const std::string& path, const TokenSetInfo& info) {
  const nlohmann::json json = {
      {"format",
       "llm.c token files: 256 x int32 header, then uint16 (magic 20240520) or uint32 "
       "(magic 20240801) tokens"},
      {"tokenizer",
       {{"file", info.tokenizer_file},
        {"sha256", info.tokenizer_sha256},
        {"vocab_size", info.vocab_size}}},
      {"source", {{"file", info.source_file}, {"bytes", info.source_bytes}}},
      {"val_fraction", info.val_fraction},
      {"train", {{"file", "train.bin"}, {"tokens", info.train_tokens}}},
      {"val", {{"file", "val.bin"}, {"tokens", info.val_tokens}}}};
  write_file_atomically(path, json.dump(2) + "\n");
}

std::optional<TokenSetInfo> read_token_set_info(const std::string& path) {
  if (!std::filesystem::exists(path)) return std::nullopt;
  try {
    const auto json = nlohmann::json::parse(read_file(path));
    TokenSetInfo info;
    info.tokenizer_file = json.at("tokenizer").at("file").get<std::string>();
    info.tokenizer_sha256 = json.at("tokenizer").at("sha256").get<std::string>();
    info.vocab_size = json.at("tokenizer").at("vocab_size").get<int64_t>();
    info.source_file = json.at("source").at("file").get<std::string>();
    info.source_bytes = json.at("source").at("bytes").get<int64_t>();
    info.val_fraction = json.at("val_fraction").get<double>();
    info.train_tokens = json.at("train").at("tokens").get<int64_t>();
    info.val_tokens = json.at("val").at("tokens").get<int64_t>();
    return info;
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not a tokens.json written by `pipetrain tokenize`: {}", path, error.what());
  }
}

void check_tokenizer_matches(const std::optional<TokenSetInfo>& info, const std::string& info_path,
                             const std::string& tokenizer_path) {
  if (!std::filesystem::is_regular_file(tokenizer_path)) {
    fail("tokenizer model '{}' not found (data.tokenizer)", tokenizer_path);
  }
  if (!info) return;
  const std::string sha256 = sha256_hex_of_file(tokenizer_path);
  if (sha256 != info->tokenizer_sha256) {
    fail(
        "tokenizer model '{}' (sha256 {}) did not make these token files: {} records '{}' "
        "(sha256 {}, vocabulary {})",
        tokenizer_path, sha256.substr(0, 12), info_path, info->tokenizer_file,
        info->tokenizer_sha256.substr(0, 12), info->vocab_size);
  }
}

}  // namespace pipetrain
