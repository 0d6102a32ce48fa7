#include "core/terminal_text.h"

#include <fmt/format.h>

namespace pipetrain {
namespace {

// The length of the strictly valid UTF-8 sequence at text[at], or 0 (RFC 3629's table: the
// second byte's range depends on the lead byte).
size_t valid_sequence_length(const std::string& text, size_t at) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[at + k]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (lead >= 0xC2 && lead <= 0xDF) length = 2;
  else if (lead >= 0xE0 && lead <= 0xEF) length = 3;
  else if (lead >= 0xF0 && lead <= 0xF4) length = 4;
  else return 0;  // a continuation byte, an overlong lead (C0, C1) or past U+10FFFF
  if (lead == 0xE0) low = 0xA0;  // overlong
  if (lead == 0xED) high = 0x9F;  // surrogates
  if (lead == 0xF0) low = 0x90;  // overlong
  if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
  if (at + length > text.size() || byte(1) < low || byte(1) > high) return 0;
  for (size_t k = 2; k < length; ++k) {
    if ((byte(k) & 0xC0) != 0x80) return 0;
  }
  return length;
}

bool is_control(const std::string& text, size_t at, size_t length) {
  const auto lead = static_cast<unsigned char>(text[at]);
  if (length == 1) return (lead < 0x20 && lead != '\n' && lead != '\t') || lead == 0x7F;
  // C1: U+0080..U+009F, encoded C2 80..C2 9F.
  return length == 2 && lead == 0xC2 && static_cast<unsigned char>(text[at + 1]) < 0xA0;
}

}  // namespace

TerminalText terminal_text(const std::string& text) {
  TerminalText shown;
  shown.text.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const size_t length = valid_sequence_length(text, at);
    if (length > 0 && !is_control(text, at, length)) {
      shown.text.append(text, at, length);
      at += length;
      continue;
    }
    const size_t escaped = length > 0 ? length : 1;
    for (size_t k = 0; k < escaped; ++k) {
      shown.text += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[at + k]));
    }
    shown.escaped_bytes += escaped;
    at += escaped;
  }
  return shown;
}

}  // namespace pipetrain
