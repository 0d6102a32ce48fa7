// pipeline.slices: a count or lengths, with one clear error for anything else.
#include <gtest/gtest.h>

#include "core/error.h"
#include "runtime/token_slices.h"

namespace pipetrain::runtime {
namespace {

TEST(TokenSlices, ACountCutsNearEqualSlicesLongerFirst) {
  const TokenSlices s = parse_token_slices("3", 16);
  EXPECT_EQ(s.lengths, (std::vector<int64_t>{6, 5, 5}));
  EXPECT_EQ(s.starts, (std::vector<int64_t>{0, 6, 11}));
  EXPECT_EQ(parse_token_slices("1", 16).lengths, (std::vector<int64_t>{16}));
}

TEST(TokenSlices, LengthsAreTakenAsGiven) {
  const TokenSlices s = parse_token_slices("5,7,4", 16);
  EXPECT_EQ(s.lengths, (std::vector<int64_t>{5, 7, 4}));
  EXPECT_EQ(s.starts, (std::vector<int64_t>{0, 5, 12}));
  EXPECT_EQ(s.count(), 3);
}

TEST(TokenSlices, BadValuesAreUserErrors) {
  EXPECT_THROW(parse_token_slices("5,7", 16), UserError);   // sum is not seq_len
  EXPECT_THROW(parse_token_slices("0", 16), UserError);
  EXPECT_THROW(parse_token_slices("17", 16), UserError);   // more slices than tokens
  EXPECT_THROW(parse_token_slices("8,-2,10", 16), UserError);
  EXPECT_THROW(parse_token_slices("dp", 16), UserError);
}

}  // namespace
}  // namespace pipetrain::runtime
