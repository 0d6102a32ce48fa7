#pragma once
// TOML parsing with the project's error convention: malformed input is a UserError naming the
// origin, line and column. Only .cpp files that read TOML include this (toml++ is heavy).
#include <string>
#include <utility>

#include <toml++/toml.h>

#include "core/error.h"

namespace pipetrain {

// Where `text` stops being valid UTF-8 (line, column), or line 0 if it is valid.
inline std::pair<int, int> first_invalid_utf8(const std::string& text) {
  int line = 1, column = 1;
  for (size_t i = 0; i < text.size(); ++column) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3 : (byte >> 3) == 0x1E ? 4 : 0;
    if (length == 0 || i + length > text.size()) return {line, column};
    for (size_t k = 1; k < length; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) return {line, column};
    }
    if (byte == '\n') line += 1, column = 0;
    i += length;
  }
  return {0, 0};
}

inline toml::table parse_toml_or_fail(const std::string& text, const std::string& origin) {
  // Invalid UTF-8 is refused here with its place, before toml++ sees it (fuzz/fuzz_config.cpp
  // first tripped a toml++ debug assertion with such input).
  const auto [line, column] = first_invalid_utf8(text);
  if (line > 0) fail("{}:{}:{}: malformed TOML: not valid UTF-8", origin, line, column);
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& error) {
    fail("{}:{}:{}: malformed TOML: {}", origin, error.source().begin.line,
         error.source().begin.column, error.description());
  }
}

}  // namespace pipetrain
