#pragma once
// The one-line message a refusal gives: what tests compare, word for word.
#include <string>

#include "core/error.h"

namespace pipetrain::test {

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
