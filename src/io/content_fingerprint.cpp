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

// Streams the file through the checksum (token files can be far larger than memory).
uint32_t add_file(const std::string& path, uint32_t crc) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("data file '{}' cannot be read", path);
  std::vector<char> chunk(size_t(4) << 20);
  while (in) {
    in.read(chunk.data(), std::streamsize(chunk.size()));
    crc = crc32c(std::string_view(chunk.data(), size_t(in.gcount())), crc);
  }
  if (in.bad()) fail("data file '{}': read error", path);
  return crc;
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

}  // namespace

std::string content_fingerprint(const std::string& path) {
  std::error_code error;
  if (!fs::exists(path, error)) return "";
  const bool folder = fs::is_directory(path, error);
  const std::vector<fs::path> files = folder ? regular_files_in(path) : std::vector<fs::path>{path};
  uint64_t bytes = 0;
  for (const auto& file : files) bytes += regular_file_size(file.string(), "data file");  // no FIFO
  if (bytes >= (uint64_t(1) << 30)) {  // a pause of seconds at the start of a run says what it is
    fmt::print(stderr, "pipetrain: reading {} ({:.1f} GB) once for its checksum, which the "
               "checkpoints record (about 1 GB/s)\n", path, double(bytes) / 1e9);
  }
  uint32_t crc = 0;
  for (const auto& file : files) {
    if (folder) crc = crc32c(file.filename().string() + '\0', crc);  // a renamed file counts
    crc = add_file(file.string(), crc);
  }
  const std::string counted = folder ? fmt::format("{} files, ", files.size()) : "";
  return fmt::format("{}{} bytes, crc32c {}", counted, bytes, format_crc32c(crc));
}

std::string data_fingerprint(const std::string& data_path, const std::string& data_root) {
  return content_fingerprint(path_or_below_root(data_path, data_root));
}

}  // namespace pipetrain
