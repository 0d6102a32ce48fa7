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
  expect_one_line_error("prepare-speech --text /nonexistent/lines.txt",
                        "'/nonexistent/lines.txt' not found");
  expect_one_line_error("prepare-speech --train-lines 100000",
                        "fewer than the 100400 asked for");
}

}  // namespace
}  // namespace pipetrain::testing
