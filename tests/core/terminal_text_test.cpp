#include <gtest/gtest.h>

#include <string>

#include "core/terminal_text.h"

namespace pipetrain {
namespace {

std::string shown(const std::string& text) { return terminal_text(text).text; }
size_t escaped(const std::string& text) { return terminal_text(text).escaped_bytes; }

TEST(TerminalText, PrintableUtf8NewlinesAndTabsStayAsTheyAre) {
  const std::string text = "ROMEO:\tcaf\xc3\xa9 \xe2\x82\xac 5\n\xf0\x9f\x98\x80 \\x41";  // é € 😀
  EXPECT_EQ(shown(text), text);
  EXPECT_EQ(escaped(text), 0u);
  EXPECT_EQ(shown(""), "");
}

TEST(TerminalText, ControlCharactersAreEscaped) {
  EXPECT_EQ(shown("a\x1b[31mb"), "a\\x1b[31mb");  // ESC: a colour change
  EXPECT_EQ(shown("a\rb\x7f"), "a\\x0db\\x7f");
  EXPECT_EQ(shown(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(shown("\xc2\x9b" "2J"), "\\xc2\\x9b2J");  // U+009B, C1's CSI
  EXPECT_EQ(escaped("\x1b\x07\xc2\x9b"), 4u);
  EXPECT_EQ(shown("\xc2\xa0"), "\xc2\xa0");  // U+00A0, the first code point after C1
}

TEST(TerminalText, BytesOutsideValidUtf8AreEscapedOneByOne) {
  EXPECT_EQ(shown("\x80"), "\\x80");                    // a lone continuation byte
  EXPECT_EQ(shown("x\xe2\x82"), "x\\xe2\\x82");         // cut short at the end
  EXPECT_EQ(shown("\xe2\x82" "A"), "\\xe2\\x82A");      // cut short by an ASCII byte
  EXPECT_EQ(shown("\xe2" "AB"), "\\xe2AB");
  EXPECT_EQ(shown("\xc0\x9b"), "\\xc0\\x9b");           // ESC written overlong
  EXPECT_EQ(shown("\xe0\x80\x80"), "\\xe0\\x80\\x80");  // overlong
  EXPECT_EQ(shown("\xf0\x8f\xbf\xbf"), "\\xf0\\x8f\\xbf\\xbf");  // overlong
  EXPECT_EQ(shown("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(shown("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // past U+10FFFF
  EXPECT_EQ(shown("\xf5\xff"), "\\xf5\\xff");
  EXPECT_EQ(escaped("\xed\xa0\x80"), 3u);
  // The edges that are valid.
  for (const char* text : {"\xe0\xa0\x80", "\xed\x9f\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "\xdf\xbf"}) {
    EXPECT_EQ(shown(text), text);
  }
}

// Whatever the bytes, nothing a terminal acts on is left: every byte below 0x20 but newline
// and tab, and 0x7f, appears only as an escape.
TEST(TerminalText, NoByteValueReachesTheTerminalRaw) {
  std::string every;
  for (int value = 0; value < 256; ++value) every += char(value);
  const TerminalText result = terminal_text(every);
  for (char c : result.text) {
    const auto byte = static_cast<unsigned char>(c);
    EXPECT_TRUE(byte >= 0x20 || byte == '\n' || byte == '\t') << int(byte);
    EXPECT_LT(byte, 0x7f) << int(byte);  // every byte from 0x80 alone is not valid UTF-8
  }
  EXPECT_EQ(result.escaped_bytes, 256u - 95 - 2);  // all but the 95 printable ASCII, \n and \t
}

}  // namespace
}  // namespace pipetrain
