// Text normalisation, the character vocabulary and the split of lines.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "speech/corpus_text.h"

namespace pipetrain::speech {
namespace {

TEST(SpeechText, NormalizeKeepsLowercaseLettersSpaceAndApostrophe) {
  EXPECT_EQ(normalize_speech_text("First Citizen: Speak, speak."), "first citizen speak speak");
  EXPECT_EQ(normalize_speech_text("  'Tis  WELL--done!\r"), "'tis well done");
  EXPECT_EQ(normalize_speech_text("1 2 3 ?"), "");
}

TEST(SpeechText, LabelsAreVocabularyIdsAndDecodeBack) {
  const auto& vocabulary = character_vocabulary();
  ASSERT_EQ(vocabulary.size(), 29u);
  EXPECT_EQ(vocabulary[0], "<blank>");
  EXPECT_EQ(vocabulary[1], " ");
  EXPECT_EQ(vocabulary[2], "'");
  EXPECT_EQ(vocabulary[3], "a");
  EXPECT_EQ(vocabulary[28], "z");
  const auto labels = character_labels("a b'z");
  EXPECT_EQ(labels, (std::vector<uint32_t>{3, 1, 4, 2, 28}));
  EXPECT_EQ(text_of_labels(labels), "a b'z");
  EXPECT_THROW(character_labels("A"), UserError);
}

const char* kSpeechTestText =
    "KING RICHARD III:\n"
    "Now is the winter of our discontent\n"
    "Made glorious summer by this sun of York;\n"
    "now is the WINTER of our discontent!\n"  // a duplicate once normalised
    "Ay.\n"                                   // one word: too short
    "And all the clouds that lour'd upon our house, in the deep bosom of the ocean buried.\n"
    "Grim-visaged war hath smooth'd his wrinkled front;\n"
    "He capers nimbly in a lady's chamber\n"
    "But I am not shaped for sportive tricks,\n";

TEST(SpeechText, SelectionTakesDistinctLinesInTheWordRangeAndSplitsThemApart) {
  LineSelection selection;
  selection.min_words = 2;
  selection.max_words = 8;
  selection.train_lines = 3;
  selection.validation_lines = 1;
  selection.test_lines = 1;
  selection.seed = 7;
  const SelectedLines lines = select_speech_lines(kSpeechTestText, selection);
  ASSERT_EQ(lines.train.size(), 3u);
  ASSERT_EQ(lines.validation.size(), 1u);
  ASSERT_EQ(lines.test.size(), 1u);
  const std::set<std::string> eligible{
      "now is the winter of our discontent", "made glorious summer by this sun of york",
      "grim visaged war hath smooth'd his wrinkled front", "he capers nimbly in a lady's chamber",
      "but i am not shaped for sportive tricks"};
  std::set<std::string> all;
  for (const auto* split : {&lines.train, &lines.validation, &lines.test}) {
    for (const auto& line : *split) {
      EXPECT_TRUE(eligible.count(line)) << line;
      all.insert(line);
    }
  }
  EXPECT_EQ(all.size(), 5u);  // no line in two splits
  const SelectedLines again = select_speech_lines(kSpeechTestText, selection);
  EXPECT_EQ(again.train, lines.train);
  EXPECT_EQ(again.test, lines.test);
}

TEST(SpeechText, TooFewLinesIsAUserError) {
  LineSelection selection;
  selection.train_lines = 5;
  selection.validation_lines = 1;
  selection.test_lines = 1;
  try {
    select_speech_lines(kSpeechTestText, selection);
    FAIL() << "no error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("5 distinct lines of 2-8 words, fewer than the 7"),
              std::string::npos)
        << error.what();
  }
}

TEST(SpeechText, RandomIsSplitMix64) {
  SpeechRandom random(0);
  EXPECT_EQ(random.next(), 0xe220a8397b1dcdafULL);  // SplitMix64's first output for seed 0
  EXPECT_EQ(random.next(), 0x6e789e6aa1b965f4ULL);
}

}  // namespace
}  // namespace pipetrain::speech
