#include "core/progress.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/text.h"

namespace pipetrain {

ProgressLine::ProgressLine(int64_t total_steps, int64_t every_non_tty, std::FILE* out, std::string unit)
    : total_(total_steps), every_(std::max<int64_t>(1, every_non_tty)), out_(out), tty_(::isatty(::fileno(out)) != 0),
      unit_(std::move(unit)) {}

void ProgressLine::update(int64_t step, const std::string& fields, double seconds_per_step) {
  const double eta = seconds_per_step * static_cast<double>(total_ - step);
  const std::string line = fmt::format("{} {}/{} | {} | ETA {}", unit_, step, total_, fields,
                                       format_duration(eta));
  if (tty_) {
    fmt::print(out_, "\r\033[K{}", line);
    dirty_ = true;
  } else if (step % every_ == 0 || step == total_) {
    fmt::print(out_, "{}\n", line);
  }
  std::fflush(out_);
}

void ProgressLine::finish() {
  if (dirty_) fmt::print(out_, "\n");
  dirty_ = false;
  std::fflush(out_);
}

}  // namespace pipetrain
