#pragma once
// Text a program prints that it did not write itself (a model's sample), made safe for a terminal.
#include <cstddef>
#include <string>

namespace pipetrain {

struct TerminalText {
  std::string text;
  size_t escaped_bytes = 0;  // bytes written as \xNN
};

// Valid UTF-8 (strictly: no overlong forms, surrogates or code points past U+10FFFF), newlines
// and tabs stay as they are; every other control character (C0, DEL, C1) and every byte that is
// not part of valid UTF-8 becomes \xNN. A byte-level model's early samples are close to random
// bytes: printed raw, an escape byte in them can move the cursor, retitle the window or switch
// the terminal to another mode.
TerminalText terminal_text(const std::string& text);

}  // namespace pipetrain
