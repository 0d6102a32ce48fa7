#pragma once
// llm.c's token files (karpathy/llm.c dev/data/data_common.py), read and written exactly: a
// header of 256 little-endian int32 values, [0] = magic, [1] = version, [2] = token count, then
// the tokens, little-endian: magic 20240520 / version 1 for uint16 tokens (GPT-2's 50257 fit),
// 20240801 / version 7 for uint32 tokens (Llama 3). Reading memory-maps the file, so a corpus
// larger than RAM works: only the windows a batch touches are paged in.
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain {

constexpr int64_t kTokenFileHeaderBytes = 256 * 4;
constexpr int32_t kTokenFileMagicU16 = 20240520, kTokenFileVersionU16 = 1;
constexpr int32_t kTokenFileMagicU32 = 20240801, kTokenFileVersionU32 = 7;
// llm.c asserts fewer than 2^31 tokens per file (the count is an int32).
constexpr int64_t kTokenFileMaxTokens = (int64_t(1) << 31) - 1;

// 2 (uint16) when every id of a vocabulary of `vocab_size` fits, else 4 (uint32).
int token_bytes_for_vocab(int64_t vocab_size);

class TokenFile {
 public:
  // UserError if missing, or its magic, version or size do not match the format.
  explicit TokenFile(const std::string& path);
  ~TokenFile();
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&&) = delete;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return count_; }
  int token_bytes() const { return token_bytes_; }
  const std::string& path() const { return path_; }
  uint32_t at(int64_t index) const;
  // Tokens [start, start + count) into out[0 .. count).
  void copy(int64_t start, int64_t count, int64_t* out) const;
  // The largest id in the file: one sequential pass over it (first call only).
  uint32_t max_token() const;

 private:
  std::string path_;
  const unsigned char* map_ = nullptr;
  size_t map_bytes_ = 0;
  int64_t count_ = 0;
  int token_bytes_ = 2;
  mutable int64_t max_token_ = -1;
};

// Streams tokens into `path` through a temporary file; finish() fills in the count and renames
// it into place, so an interrupted write never leaves a torn token file.
class TokenFileWriter {
 public:
  TokenFileWriter(const std::string& path, int token_bytes);
  ~TokenFileWriter();  // unfinished: the temporary file is removed
  TokenFileWriter(const TokenFileWriter&) = delete;
  TokenFileWriter& operator=(const TokenFileWriter&) = delete;

  void append(const std::vector<int64_t>& tokens);  // UserError for ids the width cannot hold
  void finish();
  int64_t count() const { return count_; }

 private:
  std::string path_, temp_;
  int fd_ = -1;
  int token_bytes_;
  int64_t count_ = 0;
};

void write_token_file(const std::string& path, const std::vector<int64_t>& tokens, int token_bytes);

}  // namespace pipetrain
