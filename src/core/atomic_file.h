#pragma once
// A file written in pieces through a temporary in the same folder, fsync, then rename: a crash
// or an error leaves either the old file or the new one under `path`, never a torn one. Lets a
// large file (a checkpoint) be written without first holding all of it in memory.
#include <string>
#include <string_view>

namespace pipetrain {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // UserError naming `path` if it cannot be created
  ~AtomicFile();                          // not committed: the temporary is removed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(std::string_view bytes);  // appends; UserError naming `path` (disk full, ...)
  void commit();                       // fsync, close, rename onto `path`; UserError on failure

  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail_and_discard(int error);

  std::string path_, temp_;
  int fd_ = -1;
};

}  // namespace pipetrain
