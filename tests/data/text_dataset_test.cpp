#include <gtest/gtest.h>

#include "core/error.h"
#include "data/text_dataset.h"

namespace pipetrain {
namespace {

std::string alphabet_text(size_t size) {
  std::string text;
  for (size_t i = 0; i < size; ++i) text += static_cast<char>('a' + i % 26);
  return text;
}

TEST(TextDataset, SplitsHeadForTrainingAndTailForValidation) {
  const auto data = TextDataset::from_text(alphabet_text(1000), 0.1, 8);
  EXPECT_EQ(data.train_tokens(), 900);
  EXPECT_EQ(data.val_tokens(), 100);
}

TEST(TextDataset, TargetsAreInputsShiftedByOne) {
  const auto data = TextDataset::from_text(alphabet_text(1000), 0.1, 8);
  const TokenBatch batch = data.train_batch(7, 0, 4);
  ASSERT_EQ(batch.inputs.size(), 32u);
  for (int64_t row = 0; row < 4; ++row) {
    for (int64_t t = 0; t < 8; ++t) {
      const int64_t input = batch.inputs[row * 8 + t], target = batch.targets[row * 8 + t];
      EXPECT_EQ((input - 'a' + 1) % 26, target - 'a');  // the alphabet repeats
      if (t + 1 < 8) {
        EXPECT_EQ(batch.inputs[row * 8 + t + 1], target);
      }
    }
  }
}

TEST(TextDataset, BatchesArePureFunctionsOfSeedAndStep) {
  const auto data = TextDataset::from_text(alphabet_text(5000), 0.1, 16);
  EXPECT_EQ(data.train_batch(1, 5, 8).inputs, data.train_batch(1, 5, 8).inputs);
  EXPECT_NE(data.train_batch(1, 5, 8).inputs, data.train_batch(1, 6, 8).inputs);
  EXPECT_NE(data.train_batch(1, 5, 8).inputs, data.train_batch(2, 5, 8).inputs);
  EXPECT_EQ(data.val_batch(3, 4).inputs, data.val_batch(3, 4).inputs);
}

TEST(TextDataset, RowsCutMicrobatches) {
  const auto data = TextDataset::from_text(alphabet_text(5000), 0.1, 16);
  const TokenBatch batch = data.train_batch(1, 0, 6);
  const TokenBatch rows = batch.rows(2, 3);
  EXPECT_EQ(rows.batch_size, 3);
  EXPECT_EQ(std::vector<int64_t>(batch.inputs.begin() + 32, batch.inputs.begin() + 80), rows.inputs);
  EXPECT_EQ(std::vector<int64_t>(batch.targets.begin() + 32, batch.targets.begin() + 80), rows.targets);
}

TEST(TextDataset, BytesRoundTrip) {
  const std::string text = "Hello\n\xff\x01";
  EXPECT_EQ(decode_bytes(encode_bytes(text)), text);
  EXPECT_EQ(encode_bytes("\xff")[0], 255);
}

TEST(TextDataset, TooShortOrMissingDataIsAUserError) {
  EXPECT_THROW(TextDataset::from_text("short", 0.1, 8), UserError);
  EXPECT_THROW(TextDataset("/nonexistent/data.txt", 0.1, 8), UserError);
}

}  // namespace
}  // namespace pipetrain
