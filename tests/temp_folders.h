#pragma once
// Test folders that go when the test process exits (no project headers: every test may use it).
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <vector>

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

}  // namespace pipetrain::test
