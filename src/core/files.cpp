#include "core/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
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
  // A FIFO would block the open until a writer comes, a device never end: refused, not waited
  // on. A folder would open, and read as nothing.
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode)) fail("cannot read '{}': it is a folder, not a file", path);
    if (!S_ISREG(info.st_mode)) fail("cannot read '{}': not a regular file", path);
  }
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

namespace {

const char* error_file_path = nullptr;  // read before any signal: getenv is not signal-safe

void on_bus_error(int) {
  static const char message[] =
      "pipetrain: error: a memory-mapped data file (token or speech feature file) shrank while "
      "the run read it: rewriting or truncating data files during a run is not supported; "
      "write new files under new names\n";
  int fd = 2;
  if (error_file_path != nullptr) fd = ::open(error_file_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fd = 2;
  [[maybe_unused]] const ssize_t written = ::write(fd, message, sizeof message - 1);
  ::_exit(2);
}

}  // namespace

void report_shrunk_mapped_files() {
  static const bool installed = [] {
    const char* file = std::getenv(kErrorFileVariable);
    error_file_path = file != nullptr && *file != 0 ? file : nullptr;
    struct sigaction action {};
    action.sa_handler = on_bus_error;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGBUS, &action, nullptr) == 0;
  }();
  (void)installed;
}

int open_without_waiting(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
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

std::string path_or_below_root(const std::string& path, const std::string& root) {
  std::error_code error;
  if (path.empty() || fs::exists(path, error) || fs::path(path).is_absolute()) return path;
  const fs::path below = fs::path(root) / path;
  return fs::exists(below, error) ? below.string() : path;
}

std::string resolve_existing_path(const std::string& path, const std::string& fallback_root) {
  const std::string found = path_or_below_root(path, fallback_root);
  if (fs::exists(found)) return found;
  fail("data file '{}' not found (also looked in '{}')", path, fallback_root);
}

void require_folder(const std::string& path, const std::string& what, const std::string& holds,
                    const std::string& prefix) {
  std::error_code error;
  if (fs::is_directory(path, error)) return;
  if (fs::exists(path, error)) {
    fail("{}'{}' is a file, not a {} (the folder holding {})", prefix, path, what, holds);
  }
  fail("{}{} '{}' does not exist", prefix, what, path);
}

void require_writable_output(const std::string& path, const std::string& option) {
  if (path.empty()) return;
  std::error_code error;
  if (fs::is_directory(path, error)) fail("{}: '{}' is a folder; give a file name", option, path);
  const fs::path parent = fs::path(path).parent_path().empty() ? fs::path(".") : fs::path(path).parent_path();
  if (!fs::is_directory(parent, error)) fail("{}: cannot write '{}': folder '{}' does not exist", option, path, parent.string());
  if (::access(parent.c_str(), W_OK) != 0) {
    fail("{}: cannot write '{}': folder '{}' is not writable", option, path, parent.string());
  }
}

}  // namespace pipetrain
