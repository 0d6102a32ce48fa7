// CRC32C against published check values (RFC 3720 B.4, the "123456789" check value), and its
// slicing-by-8 path against the byte-at-a-time tail on every split of one buffer.
#include <gtest/gtest.h>

#include <string>

#include "io/crc32c.h"

namespace pipetrain {
namespace {

TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string ascending(32, '\0');
  for (int i = 0; i < 32; ++i) ascending[size_t(i)] = char(i);
  EXPECT_EQ(crc32c(ascending), 0x46DD794Eu);
  EXPECT_EQ(crc32c_hex("123456789"), "e3069283");
}

TEST(Crc32c, ContinuesAcrossAnySplitAndSeesOneFlippedBit) {
  std::string bytes(100, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 37 + 11);
  const uint32_t whole = crc32c(bytes);
  for (size_t split = 0; split <= bytes.size(); ++split) {
    EXPECT_EQ(crc32c(bytes.substr(split), crc32c(bytes.substr(0, split))), whole) << split;
  }
  for (size_t bit = 0; bit < bytes.size() * 8; ++bit) {
    std::string flipped = bytes;
    flipped[bit / 8] = char(flipped[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_NE(crc32c(flipped), whole) << "bit " << bit;
  }
}

}  // namespace
}  // namespace pipetrain
