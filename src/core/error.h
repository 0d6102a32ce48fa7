#pragma once
// Errors a user can cause (bad config, missing file, impossible plan) are UserError:
// the CLI prints their message as one line and exits non-zero. Anything else is a bug.
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace pipetrain {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

// A worker our launcher started writes its error line into the file this environment variable
// names instead of stderr: the launcher reports the run's cause in one line (cli/run_cli.cpp).
constexpr const char* kErrorFileVariable = "PIPETRAIN_ERROR_FILE";

// Throws UserError with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw UserError(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace pipetrain
