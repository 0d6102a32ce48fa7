#include "io/content_fingerprint.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "io/crc32c.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

struct Fingerprint {
  uint32_t crc = 0;
  uint64_t bytes = 0;
};

// Streams the file through the checksum (token files can be far larger than memory).
void add_file(const std::string& path, Fingerprint& print) {
  print.bytes += regular_file_size(path, "data file");  // a FIFO or device is refused, not read
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("data file '{}' cannot be read", path);
  std::vector<char> chunk(size_t(4) << 20);
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    print.crc = crc32c(std::string_view(chunk.data(), size_t(in.gcount())), print.crc);
  }
  if (in.bad()) fail("data file '{}': read error", path);
}

std::vector<fs::path> regular_files_in(const std::string& dir) {
  std::vector<fs::path> files;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error)) files.push_back(entry.path());
  }
  if (error) fail("data folder '{}' cannot be listed: {}", dir, error.message());
  std::sort(files.begin(), files.end());
  return files;
}

// A pause of seconds at the start of a run says what it is.
void announce_if_large(const std::string& path, const std::vector<fs::path>& files) {
  uint64_t bytes = 0;
  for (const auto& file : files) bytes += regular_file_size(file.string(), "data file");
  if (bytes < (uint64_t(1) << 30)) return;
  fmt::print(stderr, "pipetrain: reading {} ({:.1f} GB) once for its checksum, which the "
             "checkpoints record (about 1 GB/s)\n", path, double(bytes) / 1e9);
}

}  // namespace

std::string content_fingerprint(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return "";
  Fingerprint print;
  if (!fs::is_directory(path, error)) {
    announce_if_large(path, {fs::path(path)});
    add_file(path, print);
    return fmt::format("{} bytes, crc32c {}", print.bytes, format_crc32c(print.crc));
  }
  const auto files = regular_files_in(path);
  announce_if_large(path, files);
  for (const auto& file : files) {
    print.crc = crc32c(file.filename().string() + '\0', print.crc);  // a renamed file counts
    add_file(file.string(), print);
  }
  return fmt::format("{} files, {} bytes, crc32c {}", files.size(), print.bytes, format_crc32c(print.crc));
}

std::string data_fingerprint(const std::string& data_path, const std::string& data_root) {
  std::error_code error;
  const bool below_root = !fs::path(data_path).is_absolute() && !fs::exists(data_path, error);
  return content_fingerprint(below_root ? (fs::path(data_root) / data_path).string() : data_path);
}

}  // namespace pipetrain
