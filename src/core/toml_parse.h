#pragma once
// TOML parsing with the project's error convention: malformed input is a UserError naming the
// origin, line and column. Only .cpp files that read TOML include this (toml++ is heavy).
#include <string>

#include <toml++/toml.h>

#include "core/error.h"

namespace pipetrain {

inline toml::table parse_toml_or_fail(const std::string& text, const std::string& origin) {
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& error) {
    fail("{}:{}:{}: malformed TOML: {}", origin, error.source().begin.line,
         error.source().begin.column, error.description());
  }
}

}  // namespace pipetrain
