#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace pipetrain {

AtomicFile::AtomicFile(std::string path)
    : path_(std::move(path)), temp_(path_ + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd_ < 0) fail("cannot write '{}': {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(temp_.c_str());
}

void AtomicFile::fail_and_discard(int error) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
  fail("cannot write '{}': {}", path_, std::strerror(error));
}

void AtomicFile::write(std::string_view bytes) {
  if (fd_ < 0) fail("cannot write '{}': already finished", path_);
  size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd_, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_and_discard(errno);
    written += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("cannot write '{}': already finished", path_);
  if (::fsync(fd_) != 0) fail_and_discard(errno);
  const int closed = ::close(fd_);
  const int close_error = errno;
  fd_ = -1;
  if (closed != 0 || ::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int error = closed != 0 ? close_error : errno;
    ::unlink(temp_.c_str());
    fail("cannot write '{}': {}", path_, std::strerror(error));
  }
}

}  // namespace pipetrain
