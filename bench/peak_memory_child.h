#pragma once
// Runs one benchmark configuration in a fresh child process and reports its peak resident
// memory (getrusage of the child), so configurations do not inherit each other's high-water
// mark or allocator caches. The parent must not have started libtorch/OpenMP threads before
// forking (a forked child of a threaded parent can deadlock in the thread pool).
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

namespace pipetrain::bench {

struct ChildResult {
  bool ok = false;
  double peak_rss_mb = 0.0;  // ru_maxrss of the child
  std::string report;        // what the child wrote (one line, e.g. "seconds loss")
};

// work() runs in the child; its returned string is passed back through a pipe.
inline ChildResult run_in_child(const std::function<std::string()>& work) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    const std::string line = work();
    if (write(fds[1], line.data(), line.size()) < 0) _exit(2);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  ChildResult result;
  char buffer[512];
  ssize_t n;
  while ((n = read(fds[0], buffer, sizeof buffer)) > 0) result.report.append(buffer, size_t(n));
  close(fds[0]);
  int status = 0;
  struct rusage usage {};
  if (wait4(pid, &status, 0, &usage) == pid) {
    result.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    result.peak_rss_mb = double(usage.ru_maxrss) / 1024.0;  // KiB on Linux
  }
  return result;
}

}  // namespace pipetrain::bench
