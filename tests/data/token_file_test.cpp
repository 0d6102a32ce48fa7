#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "data/token_file.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const auto dir =
      fs::temp_directory_path() / fmt::format("pipetrain_token_file_{}_{}", name, ::getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// A header built by hand (not by TokenFileWriter): magic, version, count, then zeros.
std::string header_bytes(int32_t magic, int32_t version, int32_t count) {
  std::string header(kTokenFileHeaderBytes, '\0');
  const int32_t fields[3] = {magic, version, count};
  for (int f = 0; f < 3; ++f) {
    for (int b = 0; b < 4; ++b) header[size_t(4 * f + b)] = char(uint32_t(fields[f]) >> (8 * b));
  }
  return header;
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::vector<int64_t> read_all(const TokenFile& file) {
  std::vector<int64_t> tokens(size_t(file.size()));
  file.copy(0, file.size(), tokens.data());
  return tokens;
}

std::string message_of(const std::string& path) {
  try {
    TokenFile file(path);
  } catch (const UserError& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(TokenFile, RoundTripsUint16AndUint32Tokens) {
  const auto dir = fresh_dir("round_trip");
  const std::vector<int64_t> narrow = {0, 1, 50256, 65535, 7, 7};
  const std::vector<int64_t> wide = {0, 65536, 128255, 4294967295LL, 3};
  write_token_file((dir / "narrow.bin").string(), narrow, 2);
  write_token_file((dir / "wide.bin").string(), wide, 4);
  EXPECT_EQ(fs::file_size(dir / "narrow.bin"), 1024u + 2 * narrow.size());
  EXPECT_EQ(fs::file_size(dir / "wide.bin"), 1024u + 4 * wide.size());
  const TokenFile narrow_file((dir / "narrow.bin").string()),
      wide_file((dir / "wide.bin").string());
  EXPECT_EQ(narrow_file.token_bytes(), 2);
  EXPECT_EQ(wide_file.token_bytes(), 4);
  EXPECT_EQ(read_all(narrow_file), narrow);
  EXPECT_EQ(read_all(wide_file), wide);
  EXPECT_EQ(narrow_file.max_token(), 65535u);
  EXPECT_EQ(wide_file.max_token(), 4294967295u);
  EXPECT_EQ(wide_file.at(1), 65536u);
  // The header is llm.c's, byte for byte.
  std::ifstream in(dir / "narrow.bin", std::ios::binary);
  std::string head(12, '\0');
  in.read(head.data(), 12);
  EXPECT_EQ(head, header_bytes(20240520, 1, 6).substr(0, 12));
  fs::remove_all(dir);
}

TEST(TokenFile, ReadsAFileWrittenByPythonWithTheSameTokens) {
  const auto dir = fresh_dir("python");
  const std::vector<int64_t> gpt2 = {15496, 11, 995, 0, 65535, 50256, 198, 198};
  const std::vector<int64_t> llama3 = {128000, 9906, 11, 1917, 0, 4294967295LL};
  const auto write = [&](const std::string& name, const std::string& kind,
                         const std::vector<int64_t>& tokens) {
    const std::string command =
        fmt::format("python3 {}/tests/data/write_llmc_tokens.py {} {} {}", PIPETRAIN_SOURCE_DIR,
                    (dir / name).string(), kind, fmt::join(tokens, " "));
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  };
  write("gpt2.bin", "gpt-2", gpt2);
  write("llama3.bin", "llama-3", llama3);
  const TokenFile gpt2_file((dir / "gpt2.bin").string()),
      llama3_file((dir / "llama3.bin").string());
  EXPECT_EQ(gpt2_file.token_bytes(), 2);
  EXPECT_EQ(read_all(gpt2_file), gpt2);
  EXPECT_EQ(llama3_file.token_bytes(), 4);
  EXPECT_EQ(read_all(llama3_file), llama3);
  // And ours is byte for byte what the script writes.
  write_token_file((dir / "ours.bin").string(), gpt2, 2);
  std::ifstream a(dir / "gpt2.bin", std::ios::binary), b(dir / "ours.bin", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(a), {}),
            std::string(std::istreambuf_iterator<char>(b), {}));
  fs::remove_all(dir);
}

TEST(TokenFile, RefusesWrongMagicVersionOrSize) {
  const auto dir = fresh_dir("bad");
  const std::string two_tokens("\x01\x00\x02\x00", 4);
  write_bytes(dir / "magic.bin", header_bytes(20240521, 1, 2) + two_tokens);
  write_bytes(dir / "version.bin", header_bytes(20240520, 7, 2) + two_tokens);
  write_bytes(dir / "truncated.bin", header_bytes(20240520, 1, 3) + two_tokens);
  write_bytes(dir / "trailing.bin", header_bytes(20240520, 1, 1) + two_tokens);
  write_bytes(dir / "short.bin", header_bytes(20240520, 1, 0).substr(0, 100));
  write_bytes(dir / "negative.bin", header_bytes(20240520, 1, -1));
  EXPECT_NE(
      message_of((dir / "magic.bin").string()).find("not an llm.c token file: magic 20240521"),
      std::string::npos)
      << message_of((dir / "magic.bin").string());
  EXPECT_NE(message_of((dir / "version.bin").string())
                .find("version 7 is not supported with magic 20240520"),
            std::string::npos)
      << message_of((dir / "version.bin").string());
  EXPECT_NE(message_of((dir / "truncated.bin").string())
                .find("is truncated: its header counts 3 tokens (6 bytes) but only 4"),
            std::string::npos)
      << message_of((dir / "truncated.bin").string());
  EXPECT_NE(message_of((dir / "trailing.bin").string()).find("has 2 bytes after its 1 tokens"),
            std::string::npos)
      << message_of((dir / "trailing.bin").string());
  EXPECT_NE(
      message_of((dir / "short.bin").string()).find("too short for an llm.c token file: 100 bytes"),
      std::string::npos)
      << message_of((dir / "short.bin").string());
  EXPECT_NE(message_of((dir / "negative.bin").string()).find("token count is negative (-1)"),
            std::string::npos)
      << message_of((dir / "negative.bin").string());
  EXPECT_NE(message_of((dir / "missing.bin").string()).find("not found"), std::string::npos);
  EXPECT_NE(message_of(dir.string()).find("not a regular file"), std::string::npos);
  EXPECT_NE(message_of("/dev/zero").find("not a regular file"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TokenFile, WriterRefusesIdsTheWidthCannotHoldAndLeavesNoFile) {
  const auto dir = fresh_dir("writer");
  const auto path = (dir / "out.bin").string();
  EXPECT_THROW(write_token_file(path, {1, 65536}, 2), UserError);
  EXPECT_THROW(write_token_file(path, {-1}, 4), UserError);
  EXPECT_TRUE(fs::is_empty(dir));  // neither the file nor its temporary
  EXPECT_EQ(token_bytes_for_vocab(65536), 2);
  EXPECT_EQ(token_bytes_for_vocab(65537), 4);
  fs::remove_all(dir);
}

long resident_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

TEST(TokenFile, ReadsAFourGibFileWithoutLoadingIt) {
  // A sparse file of 2^31 - 1 uint16 tokens (4 GiB): a reader that copied the tokens into memory
  // would need 4 GiB (8 GiB as int64); the mapping touches only the pages it reads.
  const auto dir = fresh_dir("large");
  const auto path = dir / "large.bin";
  write_bytes(path, header_bytes(20240520, 1, int32_t(kTokenFileMaxTokens)));
  fs::resize_file(path, uintmax_t(kTokenFileHeaderBytes + 2 * kTokenFileMaxTokens));
  {  // the last token, 4 GiB in
    std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(std::streamoff(kTokenFileHeaderBytes + 2 * (kTokenFileMaxTokens - 1)));
    out.write("\x34\x12", 2);
  }
  const long before = resident_kib();
  const TokenFile file(path.string());
  EXPECT_EQ(file.size(), kTokenFileMaxTokens);
  EXPECT_EQ(file.at(kTokenFileMaxTokens - 1), 0x1234u);
  EXPECT_EQ(file.at(0), 0u);
  EXPECT_LT(resident_kib() - before, 16 * 1024);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
