#pragma once
// A tiny speech feature file for runs of the transducer (data.format = "speech"): 80 mel bins,
// the character vocabulary, ragged utterances in every split (8 train, 4 validation, 2 test,
// 2 unseen-voice) of 9..40 frames and 1..6 labels, values from a seeded generator. The same
// bytes every time; written once per machine (a temporary file renamed into place) and named by
// its version, so a changed generator writes a new one.
#include <filesystem>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <unistd.h>

#include "speech/corpus_text.h"
#include "speech/feature_file.h"

namespace pipetrain::testing {

inline std::string tiny_speech_file() {
  namespace fs = std::filesystem;
  using namespace pipetrain::speech;
  // Named by this generator's version (v1: bump it with any change below) and the file format's,
  // so a changed generator or format never reads an older machine-wide copy.
  const fs::path path = fs::temp_directory_path() /
                        ("pipetrain_tiny_speech_v1_format" + std::to_string(kSpeechFileVersion) + ".bin");
  if (fs::exists(path)) return path.string();
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
  const fs::path partial = path.string() + ".partial" + std::to_string(getpid());
  write_speech_features(partial.string(), info, utterances);
  std::error_code taken;  // another test process made it first: the same bytes
  fs::rename(partial, path, taken);
  if (taken) fs::remove(partial);
  return path.string();
}

}  // namespace pipetrain::testing
