#pragma once
// For tests that write files: empty folders unique per test process, removed when it exits,
// and the one-line message of a refused write (user_error.h).
#include <unistd.h>

#include <filesystem>
#include <iterator>
#include <string>

#include "temp_folders.h"
#include "user_error.h"

namespace pipetrain::test {

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

}  // namespace pipetrain::test
