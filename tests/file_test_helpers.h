#pragma once
// For tests that write files: empty folders unique per test process, removed when it exits,
// and the one-line message of a refused write.
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"

namespace pipetrain::test {

// `dir` is removed when this test process exits (a failed test's story is in its log; its
// folders would only fill /tmp: thousands of them, gigabytes, before this). Not by a forked child.
inline void remove_at_exit(const std::filesystem::path& dir) {
  static struct Made {
    std::mutex lock;
    std::vector<std::filesystem::path> dirs;
    pid_t owner = ::getpid();
    ~Made() {
      if (::getpid() != owner) return;
      std::error_code ignored;
      for (const auto& made : dirs) std::filesystem::remove_all(made, ignored);
    }
  } made;
  const std::lock_guard<std::mutex> held(made.lock);
  made.dirs.push_back(dir);
}

inline std::filesystem::path fresh_folder(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  remove_at_exit(dir);
  return dir;
}

inline size_t files_in(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

// The message of the UserError `action` throws ("" if none).
template <typename Action>
std::string user_error_of(Action&& action) {
  try {
    action();
  } catch (const UserError& error) {
    return error.what();
  }
  return "";
}

}  // namespace pipetrain::test
