#include "core/terminal_text.h"

#include <fmt/format.h>

#include "core/text.h"

namespace pipetrain {
namespace {

// The length of the strictly valid UTF-8 sequence at text[at], or 0: the shared rule (core/text.h)
// and, beyond it, RFC 3629's ranges for the second byte (no overlong forms, surrogates or code
// points past U+10FFFF), which a terminal's decoder may not enforce.
size_t valid_sequence_length(const std::string& text, size_t at) {
  const auto lead = static_cast<unsigned char>(text[at]);
  const size_t length = utf8_sequence_length(lead);
  if (length == 0 || at + length > text.size() || !utf8_sequence_valid(text.data() + at, length)) {
    return 0;
  }
  if (length == 1) return 1;
  const auto second = static_cast<unsigned char>(text[at + 1]);
  const bool overlong = lead == 0xC0 || lead == 0xC1 || (lead == 0xE0 && second < 0xA0) ||
                        (lead == 0xF0 && second < 0x90);
  const bool surrogate = lead == 0xED && second > 0x9F;
  const bool past_last = lead > 0xF4 || (lead == 0xF4 && second > 0x8F);
  return overlong || surrogate || past_last ? 0 : length;
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
