#pragma once
// TOML parsing with the project's error convention: malformed input is a UserError naming the
// origin, line and column. Only .cpp files that read TOML include this (toml++ is heavy).
#include <cctype>
#include <string>
#include <utility>

#include <toml++/toml.h>

#include "core/error.h"
#include "core/text.h"

namespace pipetrain {

// Where `text` stops being valid UTF-8 (line, column), or line 0 if it is valid.
inline std::pair<int, int> first_invalid_utf8(const std::string& text) {
  int line = 1, column = 1;
  for (size_t i = 0; i < text.size(); ++column) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const size_t length = utf8_sequence_length(byte);
    if (i + length > text.size() || !utf8_sequence_valid(text.data() + i, length)) return {line, column};
    if (byte == '\n') line += 1, column = 0;
    i += length;
  }
  return {0, 0};
}

// Where a non-ASCII byte stands outside a string or comment (line, column), or line 0. toml++
// 3.x reaches __builtin_unreachable (undefined behaviour) when it tests such a character for
// whitespace (found by fuzz/fuzz_config.cpp, e.g. U+FEFB at the start of a line); pipetrain's
// keys are ASCII, so only comments and one-line string values (`key = "..."`) may hold
// other characters; the scan is conservative where TOML's quoting gets subtle.
// Whether text[begin, end) is `bare_key =` with optional blanks: where a string value starts.
inline bool is_key_equals(const std::string& text, size_t begin, size_t end) {
  size_t i = begin;
  while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i;
  const size_t key = i;
  while (i < end && (std::isalnum(static_cast<unsigned char>(text[i])) || text[i] == '_' || text[i] == '-')) ++i;
  if (i == key) return false;
  while (i < end && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i == end || text[i] != '=') return false;
  for (++i; i < end; ++i) {
    if (text[i] != ' ' && text[i] != '\t') return false;
  }
  return true;
}

inline std::pair<int, int> first_non_ascii_outside_strings(const std::string& text) {
  int line = 1, column = 0;
  char open = 0;             // the open safe string's quote, '#' in a comment, or 0
  std::string triple;        // an open multi-line string's delimiter (never safe)
  bool quoted = false;       // a quote outside safe strings on this line: no comment after it
  size_t line_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    ++column;
    if (c == '\n') {
      line += 1, column = 0, open = 0, quoted = false, line_start = i + 1;
      continue;
    }
    if (open == '#') continue;
    if (static_cast<unsigned char>(c) >= 0x80 && open == 0) return {line, column};
    if (!triple.empty()) {
      if (c == '\\' && triple[0] == '"') ++i, ++column;
      else if (text.compare(i, 3, triple) == 0) i += 2, column += 2, triple.clear();
      continue;
    }
    if (open != 0) {
      if (c == '\\' && open == '"') ++i, ++column;  // an escape never closes the string
      else if (c == open) open = 0;
      continue;
    }
    const bool quote = c == '"' || c == '\'';
    if (c == '#' && !quoted) open = '#';
    if (quote && text.compare(i, 3, std::string(3, c)) == 0) {
      triple = std::string(3, c), i += 2, column += 2, quoted = true;
    } else if (quote && is_key_equals(text, line_start, i) && text.compare(i, 2, std::string(2, c)) != 0) {
      open = c;  // a value's one-line string: the one safe place
    } else if (quote) {
      quoted = true;
    }
  }
  return {0, 0};
}

inline toml::table parse_toml_or_fail(const std::string& text, const std::string& origin) {
  // Invalid UTF-8 is refused here with its place, before toml++ sees it (fuzz/fuzz_config.cpp
  // first tripped a toml++ debug assertion with such input).
  const auto [line, column] = first_invalid_utf8(text);
  if (line > 0) fail("{}:{}:{}: malformed TOML: not valid UTF-8", origin, line, column);
  const auto [at_line, at_column] = first_non_ascii_outside_strings(text);
  if (at_line > 0) {
    fail("{}:{}:{}: malformed TOML: non-ASCII character outside a string or comment", origin,
         at_line, at_column);
  }
  try {
    return toml::parse(text, origin);
  } catch (const toml::parse_error& error) {
    fail("{}:{}:{}: malformed TOML: {}", origin, error.source().begin.line,
         error.source().begin.column, error.description());
  }
}

}  // namespace pipetrain
