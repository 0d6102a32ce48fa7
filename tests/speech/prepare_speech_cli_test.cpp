// `pipetrain prepare-speech`'s user errors are one line each, espeak-ng missing included.
#include <gtest/gtest.h>

#include "../pipetrain_run.h"

namespace pipetrain::testing {
namespace {

TEST(PrepareSpeechCli, MissingEspeakNamesTheDebianPackage) {
  const auto dir = fresh_dir("speech_no_espeak");
  const ProcessResult result =
      run_pipetrain("prepare-speech --out " + (dir / "f.bin").string(),
                    "PIPETRAIN_ESPEAK_LIBRARY=/nonexistent/libespeak-ng.so.1");
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_EQ(result.output,
            "pipetrain: error: espeak-ng is missing (/nonexistent/libespeak-ng.so.1 not found): "
            "install the Debian package espeak-ng (apt-get install espeak-ng "
            "libespeak-ng-dev)\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "f.bin"));
}

TEST(PrepareSpeechCli, BadOptionsAreOneLine) {
  expect_one_line_error("prepare-speech --renditions 9", "--renditions must be between 1 and the "
                                                         "8 training voices, got 9");
  expect_one_line_error("prepare-speech --unseen-voice en-us+m1",
                        "the unseen voice 'en-us+m1' is also a training voice");
  expect_one_line_error("prepare-speech --max-frames 0", "--max-frames must be >= 1");
  // A space-separated list was one odd voice name that espeak-ng accepted.
  expect_one_line_error("prepare-speech --voices \"en-us+m1 en-us+f2\" --renditions 1",
                        "--voices: 'en-us+m1 en-us+f2' holds a space: separate voices with commas");
  expect_one_line_error("prepare-speech --text /nonexistent/lines.txt",
                        "'/nonexistent/lines.txt' not found");
  expect_one_line_error("prepare-speech --train-lines 100000",
                        "fewer than the 100400 asked for");
  // The output is checked before the synthesis, not after it.
  expect_one_line_error("prepare-speech --out /proc/pipetrain/f.bin", "cannot create folder '/proc/pipetrain'");
}

// Every utterance longer than --max-frames: no file whose every run would be refused, but one
// line saying what to change (it wrote one with all four splits empty, exit 0).
TEST(PrepareSpeechCli, AFileWithoutTrainingUtterancesIsNotWritten) {
  const auto dir = fresh_dir("speech_too_short");
  const ProcessResult result = run_pipetrain("prepare-speech --max-frames 10 --train-lines 10 --validation-lines 4 "
                                             "--test-lines 4 --renditions 1 --out " + (dir / "f.bin").string());
  EXPECT_EQ(result.exit_code, 2) << result.output;
  EXPECT_NE(result.output.find("pipetrain: error: prepare-speech: no train utterance fits --max-frames 10 (10 "
                               "longer ones dropped); raise --max-frames"),
            std::string::npos) << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "f.bin"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain::testing
