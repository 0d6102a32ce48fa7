// A tiny espeak-ng synthesis end to end: the same seed gives the same file, byte for byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "speech/prepare_speech.h"
#include "../file_test_helpers.h"

namespace pipetrain::speech {
namespace {

namespace fs = std::filesystem;

bool espeak_available() {
  try {
    require_espeak_library();
    return true;
  } catch (const UserError&) {
    return false;
  }
}

std::string file_bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// 2 training lines x 2 voices, one validation and one test line (spoken again by the unseen voice).
PrepareSpeechOptions tiny_speech_options(const fs::path& dir, const std::string& name) {
  const fs::path text = dir / "lines.txt";
  std::ofstream(text) << "Now is the winter of our discontent\n"
                         "Made glorious summer by this sun of York;\n"
                         "He capers nimbly in a lady's chamber\n"
                         "Grim-visaged war hath smooth'd his front\n";
  PrepareSpeechOptions options;
  options.text_path = text.string();
  options.out_path = (dir / name).string();
  options.lines = LineSelection{2, 8, 2, 1, 1, 11};
  options.train_renditions = 2;
  options.training_voices = {"en-us+m1", "en+f2"};
  options.unseen_voice = "en-us+m5";
  return options;
}

fs::path synthesis_dir(const std::string& name) { return test::fresh_folder("pipetrain_synthesis_" + name); }

// Where two feature files of the same plan differ: the first utterance whose frames or features
// differ (other frame counts or large differences: the audio; the same frames and rounding-size
// differences: the arithmetic), its voice, which of its frames differ, and how many utterances
// differ in all (one: a local upset; all after one: state carried from utterance to utterance).
std::string first_difference(const fs::path& a, const fs::path& b) {
  const SpeechFeatureFile one(a.string()), two(b.string());
  std::string first;
  int differing = 0, utterances = 0;
  for (size_t s = 0; s < kSpeechSplitCount; ++s) {
    const auto split = SpeechSplit(s);
    const auto x = one.load_split(split), y = two.load_split(split);
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i, ++utterances) {
      const std::string where = "split " + std::to_string(s) + " utterance " + std::to_string(i) + " (voice " +
                                std::to_string(x[i].voice) + "): ";
      if (x[i].features.sizes() != y[i].features.sizes()) {
        ++differing;
        if (first.empty()) {
          first = where + std::to_string(x[i].features.size(0)) + " vs " + std::to_string(y[i].features.size(0)) + " frames";
        }
      } else if (!torch::equal(x[i].features, y[i].features)) {
        ++differing;
        if (first.empty()) {
          const auto gap = (x[i].features - y[i].features).abs();
          const auto frames = gap.amax(1).nonzero().flatten();
          first = where + "features differ by up to " + std::to_string(gap.max().item<double>()) + " in " +
                  std::to_string(frames.numel()) + " of " + std::to_string(gap.size(0)) + " frames, " +
                  std::to_string(frames.min().item<int64_t>()) + " to " + std::to_string(frames.max().item<int64_t>());
        }
      }
    }
  }
  if (first.empty()) return "no utterance differs (the header does)";
  return first + "; " + std::to_string(differing) + " of " + std::to_string(utterances) + " utterances differ";
}

TEST(SpeechSynthesis, SameSeedGivesTheSameFileWhateverTheThreads) {
  if (!espeak_available()) GTEST_SKIP() << "espeak-ng is not installed (scripts/setup installs it)";
  const auto dir = synthesis_dir("same_seed");
  auto options = tiny_speech_options(dir, "a.bin");
  options.threads = 2;
  const PrepareSpeechSummary summary = prepare_speech(options);
  options.out_path = (dir / "b.bin").string();
  options.threads = 1;
  prepare_speech(options);
  const std::string first = file_bytes_of(dir / "a.bin");
  EXPECT_EQ(first.size(), summary.file_bytes);
  if (first != file_bytes_of(dir / "b.bin")) {
    // A third run tells a threads-dependent result (it matches b) from a rare upset (it matches a).
    options.out_path = (dir / "c.bin").string();
    prepare_speech(options);
    const std::string third = file_bytes_of(dir / "c.bin");
    ADD_FAILURE() << "same seed, different bytes: " << first_difference(dir / "a.bin", dir / "b.bin")
                  << "; a third run with 1 thread equals "
                  << (third == first ? "the 2-thread run" : third == file_bytes_of(dir / "b.bin") ? "the 1-thread run" : "neither");
  }

  const SpeechFeatureFile file((dir / "a.bin").string());
  EXPECT_EQ(file.info().utterances, (std::array<uint64_t, kSpeechSplitCount>{4, 1, 1, 1}));
  EXPECT_EQ(file.info().voices, (std::vector<std::string>{"en-us+m1", "en+f2", "en-us+m5"}));
  const auto train = file.load_split(SpeechSplit::train);
  for (size_t line = 0; line < 2; ++line) {  // each line once by each voice
    EXPECT_EQ(train[2 * line].text_line, line);
    EXPECT_EQ(train[2 * line + 1].text_line, line);
    EXPECT_NE(train[2 * line].voice, train[2 * line + 1].voice);
    EXPECT_TRUE(torch::equal(train[2 * line].labels, train[2 * line + 1].labels));
  }
  for (const auto& u : train) {
    // A 2-8 word line takes 0.5-5 s at 130-200 words per minute: 50-500 frames of 10 ms.
    EXPECT_GT(u.features.size(0), 50);
    EXPECT_LT(u.features.size(0), 500);
    EXPECT_EQ(u.features.size(1), 80);
    EXPECT_TRUE(torch::isfinite(u.features).all().item<bool>());
  }
  const auto unseen = file.utterance(SpeechSplit::unseen_voice, 0);
  const auto test = file.utterance(SpeechSplit::test, 0);
  EXPECT_EQ(unseen.voice, 2u);
  EXPECT_TRUE(torch::equal(unseen.labels, test.labels));  // the test line, by the unseen voice
}

// espeak-ng's noise comes from rand(), whose state the synthesis child inherits: whatever the
// calling process did with it (libtorch calls srand and rand), the same seed gives the same file.
TEST(SpeechSynthesis, SameSeedGivesTheSameFileWhateverTheCallersRandState) {
  if (!espeak_available()) GTEST_SKIP() << "espeak-ng is not installed (scripts/setup installs it)";
  const auto dir = synthesis_dir("rand_state");
  auto options = tiny_speech_options(dir, "a.bin");
  std::srand(12345);
  prepare_speech(options);
  options.out_path = (dir / "b.bin").string();
  std::srand(777);
  for (int i = 0; i < 1000; ++i) (void)std::rand();
  prepare_speech(options);
  EXPECT_TRUE(file_bytes_of(dir / "a.bin") == file_bytes_of(dir / "b.bin"))
      << "same seed, different bytes";
}

TEST(SpeechSynthesis, AnotherSeedSpeaksDifferently) {
  if (!espeak_available()) GTEST_SKIP() << "espeak-ng is not installed (scripts/setup installs it)";
  const auto dir = synthesis_dir("other_seed");
  auto options = tiny_speech_options(dir, "a.bin");
  prepare_speech(options);
  options.out_path = (dir / "b.bin").string();
  options.lines.seed = 12;
  prepare_speech(options);
  EXPECT_FALSE(file_bytes_of(dir / "a.bin") == file_bytes_of(dir / "b.bin"));
}

TEST(SpeechSynthesis, UnknownVoiceIsOneLine) {
  if (!espeak_available()) GTEST_SKIP() << "espeak-ng is not installed (scripts/setup installs it)";
  const auto dir = synthesis_dir("unknown_voice");
  auto options = tiny_speech_options(dir, "a.bin");
  options.training_voices = {"en-us+m1", "xx-nowhere"};
  try {
    prepare_speech(options);
    FAIL() << "no error";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("espeak-ng has no voice 'xx-nowhere'"),
              std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(fs::exists(dir / "a.bin"));
}

// The unseen voice speaks only the test lines, after every other utterance: an unknown one is
// refused before the first utterance is synthesized, not minutes later.
TEST(SpeechSynthesis, UnknownUnseenVoiceIsRefusedBeforeSynthesis) {
  if (!espeak_available()) GTEST_SKIP() << "espeak-ng is not installed (scripts/setup installs it)";
  const auto dir = synthesis_dir("unknown_unseen_voice");
  auto options = tiny_speech_options(dir, "a.bin");
  options.unseen_voice = "xx-nowhere";
  int64_t synthesized = 0;
  const auto count = [&](const PrepareSpeechProgress& progress) { synthesized = progress.done; };
  EXPECT_NE(test::user_error_of([&] { prepare_speech(options, count); }).find("espeak-ng has no voice 'xx-nowhere'"),
            std::string::npos);
  EXPECT_EQ(synthesized, 0);
  EXPECT_FALSE(fs::exists(dir / "a.bin"));
}

}  // namespace
}  // namespace pipetrain::speech
