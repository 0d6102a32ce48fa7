#include "core/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace fs = std::filesystem;

namespace pipetrain {

void write_file_atomically(const std::string& path, std::string_view bytes) {
  AtomicFile file(path);
  file.write(bytes);
  file.commit();
}

void refuse_writing_over_input(const std::string& output, const std::string& input,
                               const std::string& option) {
  std::error_code error;
  if (!fs::equivalent(output, input, error)) return;  // different files, or no output yet
  fail("{} '{}' is the input text '{}': writing it would destroy the text; choose another {}",
       option, output, input, option);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read '{}': {}", path, std::strerror(errno));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

uint64_t regular_file_size(const std::string& path, const std::string& what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) fail("cannot read {} '{}': {}", what, path, std::strerror(errno));
  if (S_ISDIR(info.st_mode)) fail("{} '{}' is a folder, not a file", what, path);
  if (!S_ISREG(info.st_mode)) fail("{} '{}' is not a regular file", what, path);
  return uint64_t(info.st_size);
}

std::string read_regular_file(const std::string& path, const std::string& what) {
  regular_file_size(path, what);
  return read_file(path);
}

void prepare_run_dir(const std::string& dir, bool overwrite) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) fail("cannot create run folder '{}': {}", dir, error.message());
  if (!overwrite && fs::exists(fs::path(dir) / "metrics.jsonl")) {
    fail("run folder '{}' already holds a run; choose another --run-dir or pass --overwrite", dir);
  }
  const std::string probe = (fs::path(dir) / ".write-test").string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail("run folder '{}' is not writable: {}", dir, std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

std::string new_run_dir_name(const std::string& parent) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  ::localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "run-%Y%m%d-%H%M%S", &local);
  fs::path candidate = fs::path(parent) / stamp;
  for (int n = 2; fs::exists(candidate); ++n) {
    candidate = fs::path(parent) / (std::string(stamp) + "-" + std::to_string(n));
  }
  return candidate.string();
}

std::string resolve_existing_path(const std::string& path, const std::string& fallback_root) {
  if (fs::exists(path)) return path;
  if (!fs::path(path).is_absolute()) {
    const fs::path alternative = fs::path(fallback_root) / path;
    if (fs::exists(alternative)) return alternative.string();
  }
  fail("data file '{}' not found (also looked in '{}')", path, fallback_root);
}

}  // namespace pipetrain
