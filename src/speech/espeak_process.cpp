// EspeakProcess: espeak-ng in a child process, its samples streamed back through a pipe.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/error.h"
#include "speech/espeak.h"

namespace pipetrain::speech {
namespace {

// Child -> parent records: i32 sample rate once, then per item i64 count + count int16 samples,
// or count -1 + i64 length + an error message.
void write_to_parent(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(3);  // the parent is gone
    p += n;
    bytes -= size_t(n);
  }
}

[[noreturn]] void run_espeak_child(int fd, const std::vector<EspeakProcess::Item>& items) {
  // espeak-ng draws its voices' noise from the C library's rand(), whose state a forked child
  // inherits from the parent, and the parent's libtorch calls rand() and srand(): the same plan
  // once spoke differently in the full test suite. The C standard's initial state makes the
  // audio a function of the plan alone.
  std::srand(1);
  bool rate_sent = false;
  try {
    Espeak& espeak = Espeak::instance();
    const int32_t rate = espeak.sample_rate();
    write_to_parent(fd, &rate, sizeof rate);
    rate_sent = true;
    for (const auto& item : items) {
      const std::vector<int16_t> samples = espeak.speak(item.text, item.voice);
      const auto count = int64_t(samples.size());
      write_to_parent(fd, &count, sizeof count);
      write_to_parent(fd, samples.data(), 2 * samples.size());
    }
  } catch (const std::exception& error) {
    const int32_t no_rate = 0;
    const int64_t marker = -1;
    const std::string message = error.what();
    const auto length = int64_t(message.size());
    if (!rate_sent) write_to_parent(fd, &no_rate, sizeof no_rate);
    write_to_parent(fd, &marker, sizeof marker);
    write_to_parent(fd, &length, sizeof length);
    write_to_parent(fd, message.data(), message.size());
  }
  ::close(fd);
  ::_exit(0);  // no atexit handlers or destructors of the parent's objects
}

}  // namespace

EspeakProcess::EspeakProcess(std::vector<Item> items) : remaining_(items.size()) {
  require_espeak_library();
  int fds[2];
  if (::pipe(fds) != 0) fail("cannot start espeak-ng: pipe: {}", std::strerror(errno));
  pid_ = ::fork();
  if (pid_ < 0) fail("cannot start espeak-ng: fork: {}", std::strerror(errno));
  if (pid_ == 0) {
    ::close(fds[0]);
    run_espeak_child(fds[1], items);
  }
  ::close(fds[1]);
  fd_ = fds[0];
  int32_t rate = 0;
  read_exactly(&rate, sizeof rate);
  sample_rate_ = rate;
  if (rate <= 0) next();  // the child failed before speaking: throws its message
}

EspeakProcess::~EspeakProcess() {
  if (fd_ >= 0) ::close(fd_);
  if (pid_ > 0) {
    if (remaining_ > 0) ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void EspeakProcess::read_exactly(void* data, size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::read(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("espeak-ng's process ended early ({})", n < 0 ? std::strerror(errno) : "EOF");
    p += n;
    bytes -= size_t(n);
  }
}

std::vector<int16_t> EspeakProcess::next() {
  int64_t count = 0;
  read_exactly(&count, sizeof count);
  if (count < 0) {
    int64_t length = 0;
    read_exactly(&length, sizeof length);
    std::string message(size_t(length), '\0');
    read_exactly(message.data(), message.size());
    remaining_ = 0;
    throw UserError(message);
  }
  std::vector<int16_t> samples(static_cast<size_t>(count));
  read_exactly(samples.data(), 2 * samples.size());
  --remaining_;
  return samples;
}

}  // namespace pipetrain::speech
