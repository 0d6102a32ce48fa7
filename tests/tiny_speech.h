#pragma once
// A tiny speech feature file for runs of the transducer (data.format = "speech"): 80 mel bins,
// the character vocabulary, ragged utterances in every split (8 train, 4 validation, 2 test,
// 2 unseen-voice) of 9..40 frames and 1..6 labels, values from a seeded generator. The same
// bytes every time; written once per test process in its own folder, removed when it exits
// (no copy shared between processes that an older generator or file format could have left).
// bench/gpu_bundle.sh writes a copy with tests/model/write_tiny_speech.cpp.
#include <filesystem>
#include <string>

#include <ATen/CPUGeneratorImpl.h>

#include "file_test_helpers.h"
#include "speech/corpus_text.h"
#include "speech/feature_file.h"

namespace pipetrain::testing {

inline void write_tiny_speech_file(const std::string& path) {
  using namespace pipetrain::speech;
  SpeechCorpusInfo info;
  info.max_frames = 40;
  info.vocabulary = character_vocabulary();
  info.voices = {"en-us+m1", "en+f1", "en-us+m5"};
  auto generator = at::detail::createCPUGenerator(7);
  std::vector<SpeechUtterance> utterances;
  const int per_split[kSpeechSplitCount] = {8, 4, 2, 2};
  int64_t n = 0;
  for (int s = 0; s < kSpeechSplitCount; ++s) {
    for (int i = 0; i < per_split[s]; ++i, ++n) {
      SpeechUtterance u;
      u.split = SpeechSplit(s);
      u.voice = s == 3 ? 2 : uint32_t(n % 2);
      u.text_line = uint32_t(i);
      u.features = torch::randn({9 + (n * 13) % 32, 80}, generator, torch::kFloat32);
      u.labels = torch::randint(1, int64_t(info.vocabulary.size()), {1 + (n * 5) % 6}, generator,
                                torch::kInt64);
      utterances.push_back(u);
    }
  }
  write_speech_features(path, info, utterances);
}

inline std::string tiny_speech_file() {
  static const std::string path = [] {
    const std::string made = (test::fresh_folder("pipetrain_tiny_speech") / "features.bin").string();
    write_tiny_speech_file(made);
    return made;
  }();
  return path;
}

}  // namespace pipetrain::testing
