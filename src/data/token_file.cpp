#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/files.h"

namespace pipetrain {
namespace {

uint32_t read_le(const unsigned char* p, int bytes) {
  uint32_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = value << 8 | p[i];
  return value;
}

void write_le(unsigned char* p, uint32_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(value >> (8 * i));
}

std::array<unsigned char, kTokenFileHeaderBytes> token_file_header(int token_bytes, int64_t count) {
  std::array<unsigned char, kTokenFileHeaderBytes> header{};
  const bool wide = token_bytes == 4;
  write_le(header.data(), uint32_t(wide ? kTokenFileMagicU32 : kTokenFileMagicU16), 4);
  write_le(header.data() + 4, uint32_t(wide ? kTokenFileVersionU32 : kTokenFileVersionU16), 4);
  write_le(header.data() + 8, uint32_t(count), 4);
  return header;
}

// The token width the header's (magic, version) pair names; UserError for any other pair.
int token_bytes_of_header(const std::string& path, int32_t magic, int32_t version) {
  if (magic != kTokenFileMagicU16 && magic != kTokenFileMagicU32) {
    fail(
        "'{}' is not an llm.c token file: magic {} (expected {} for uint16 tokens or {} for "
        "uint32 tokens)",
        path, magic, kTokenFileMagicU16, kTokenFileMagicU32);
  }
  const bool wide = magic == kTokenFileMagicU32;
  const int32_t expected = wide ? kTokenFileVersionU32 : kTokenFileVersionU16;
  if (version != expected) {
    fail("'{}': llm.c token file version {} is not supported with magic {} (expected version {})",
         path, version, magic, expected);
  }
  return wide ? 4 : 2;
}

void check_body_size(const std::string& path, int64_t count, int token_bytes, int64_t file_bytes) {
  if (count < 0) fail("'{}': the header's token count is negative ({})", path, count);
  const int64_t body = file_bytes - kTokenFileHeaderBytes, expected = count * token_bytes;
  if (body < expected) {
    fail(
        "'{}' is truncated: its header counts {} tokens ({} bytes) but only {} bytes follow "
        "the header",
        path, count, expected, body);
  }
  if (body > expected) {
    fail("'{}' has {} bytes after its {} tokens: the header's count does not match the file", path,
         body - expected, count);
  }
}

int open_regular_file(const std::string& path, struct stat& info) {
  const int fd = open_without_waiting(path);
  if (fd < 0) {
    if (errno == ENOENT) fail("token file '{}' not found", path);
    fail("cannot read token file '{}': {}", path, std::strerror(errno));
  }
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    fail("'{}' is not a token file (not a regular file)", path);
  }
  return fd;
}

template <typename Token>
uint32_t max_of(const unsigned char* tokens, int64_t count) {
  Token best = 0;
  for (int64_t i = 0; i < count; ++i) {
    Token value;
    std::memcpy(&value, tokens + i * int64_t(sizeof(Token)), sizeof(Token));
    best = std::max(best, value);
  }
  return best;
}

bool little_endian_host() {
  const uint16_t probe = 1;
  unsigned char first;
  std::memcpy(&first, &probe, 1);
  return first == 1;
}

}  // namespace

int token_bytes_for_vocab(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

TokenFile::TokenFile(const std::string& path) : path_(path) {
  struct stat info {};
  const int fd = open_regular_file(path, info);
  const auto file_bytes = static_cast<int64_t>(info.st_size);
  if (file_bytes < kTokenFileHeaderBytes) {
    ::close(fd);
    fail("'{}' is too short for an llm.c token file: {} bytes, the header alone is {}", path,
         file_bytes, kTokenFileHeaderBytes);
  }
  report_shrunk_mapped_files();  // a file rewritten under the run: one line, not a silent SIGBUS
  void* map = ::mmap(nullptr, size_t(file_bytes), PROT_READ, MAP_SHARED, fd, 0);
  const int map_error = errno;
  ::close(fd);  // the mapping keeps the file
  if (map == MAP_FAILED) fail("cannot map token file '{}': {}", path, std::strerror(map_error));
  map_ = static_cast<const unsigned char*>(map);
  map_bytes_ = size_t(file_bytes);
  try {
    const auto magic = int32_t(read_le(map_, 4)), version = int32_t(read_le(map_ + 4, 4));
    token_bytes_ = token_bytes_of_header(path, magic, version);
    count_ = int32_t(read_le(map_ + 8, 4));
    check_body_size(path, count_, token_bytes_, file_bytes);
  } catch (...) {
    ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
    throw;
  }
}

TokenFile::~TokenFile() {
  if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(other.map_),
      map_bytes_(other.map_bytes_),
      count_(other.count_),
      token_bytes_(other.token_bytes_),
      max_token_(other.max_token_) {
  other.map_ = nullptr;
}

uint32_t TokenFile::at(int64_t index) const {
  return read_le(map_ + kTokenFileHeaderBytes + index * token_bytes_, token_bytes_);
}

void TokenFile::copy(int64_t start, int64_t count, int64_t* out) const {
  const unsigned char* p = map_ + kTokenFileHeaderBytes + start * token_bytes_;
  for (int64_t i = 0; i < count; ++i) out[i] = read_le(p + i * token_bytes_, token_bytes_);
}

uint32_t TokenFile::max_token() const {
  if (max_token_ >= 0) return uint32_t(max_token_);
  const unsigned char* tokens = map_ + kTokenFileHeaderBytes;
  uint32_t best = 0;
  if (little_endian_host()) {  // the fast path: the file's byte order is the host's
    best = token_bytes_ == 2 ? max_of<uint16_t>(tokens, count_) : max_of<uint32_t>(tokens, count_);
  } else {
    for (int64_t i = 0; i < count_; ++i) best = std::max(best, at(i));
  }
  max_token_ = best;
  return best;
}

TokenFileWriter::TokenFileWriter(const std::string& path, int token_bytes)
    : path_(path), temp_(path + ".tmp." + std::to_string(::getpid())), token_bytes_(token_bytes) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("cannot write token file '{}': {}", path, std::strerror(errno));
  const auto header = token_file_header(token_bytes_, 0);  // the count comes at finish()
  if (::write(fd_, header.data(), header.size()) != ssize_t(header.size())) {
    const int error = errno;
    ::close(fd_);
    ::unlink(temp_.c_str());
    fail("cannot write token file '{}': {}", path_, std::strerror(error));
  }
}

TokenFileWriter::~TokenFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

void TokenFileWriter::append(const std::vector<int64_t>& tokens) {
  if (count_ + int64_t(tokens.size()) > kTokenFileMaxTokens) {
    fail("'{}': more than {} tokens, the most one llm.c token file holds", path_,
         kTokenFileMaxTokens);
  }
  const int64_t limit = token_bytes_ == 2 ? 65536 : int64_t(1) << 32;
  std::vector<unsigned char> bytes(tokens.size() * size_t(token_bytes_));
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= limit) {
      fail("token id {} does not fit the {}-bit token file '{}'", tokens[i], 8 * token_bytes_,
           path_);
    }
    write_le(bytes.data() + i * size_t(token_bytes_), uint32_t(tokens[i]), token_bytes_);
  }
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0) fail("cannot write token file '{}': {}", path_, std::strerror(errno));
    written += size_t(n);
  }
  count_ += int64_t(tokens.size());
}

void TokenFileWriter::finish() {
  const auto header = token_file_header(token_bytes_, count_);
  if (::pwrite(fd_, header.data(), header.size(), 0) != ssize_t(header.size()) ||
      ::fsync(fd_) != 0) {
    fail("cannot write token file '{}': {}", path_, std::strerror(errno));
  }
  const int closed = ::close(fd_);
  fd_ = -1;
  if (closed != 0 || ::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    ::unlink(temp_.c_str());
    fail("cannot write token file '{}': {}", path_, std::strerror(error));
  }
}

void write_token_file(const std::string& path, const std::vector<int64_t>& tokens,
                      int token_bytes) {
  TokenFileWriter writer(path, token_bytes);
  writer.append(tokens);
  writer.finish();
}

}  // namespace pipetrain
