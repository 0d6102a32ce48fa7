#pragma once
// `pipetrain prepare-speech`: text lines -> espeak-ng speech -> 16 kHz -> log-mel features ->
// one feature file with train / validation / test / unseen-voice splits (docs/speech.md).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "speech/corpus_text.h"
#include "speech/espeak.h"
#include "speech/feature_file.h"
#include "speech/log_mel.h"

namespace pipetrain::speech {

struct PrepareSpeechOptions {
  std::string text_path;  // lines to speak, e.g. data/tinyshakespeare.txt
  std::string out_path;
  LineSelection lines{2, 8, 2000, 200, 200, 1};  // words 2-8; train, validation, test lines; seed
  int train_renditions = 2;  // each training line spoken by this many distinct training voices
  std::vector<std::string> training_voices{
      "en-us+m1", "en-us+f2", "en+m3", "en+f1",
      "en-gb-scotland+m2", "en-gb-x-rp+f3", "en-029+m4", "en-gb-x-gbclan+f4"};
  std::string unseen_voice = "en-us+m5";  // speaks the test lines only: the unseen-voice split
  int rate_min = 130, rate_max = 200;     // words per minute, uniform per utterance
  int pitch_min = 35, pitch_max = 65;     // espeak-ng base pitch, uniform per utterance
  int64_t max_frames = 800;               // longer utterances are dropped (and counted)
  int threads = 2;  // feature threads; espeak-ng speaks in its own process meanwhile
  LogMelSpec features;
};

// One utterance to synthesize, fixed by the seed before any audio is made.
struct PlannedUtterance {
  SpeechSplit split = SpeechSplit::train;
  uint32_t text_line = 0;
  std::string text;
  uint32_t voice_index = 0;  // into training_voices, then unseen_voice last
  SpokenVoice voice;
};

// Every split's utterances in split order: each training line `train_renditions` times with
// distinct training voices, each validation and test line once with a training voice, and each
// test line again with the unseen voice. Speeds and pitches are drawn per utterance.
std::vector<PlannedUtterance> plan_speech_utterances(const SelectedLines& lines,
                                                     const PrepareSpeechOptions& options);

struct PrepareSpeechProgress {
  int64_t done = 0, total = 0;
  double audio_seconds = 0;  // synthesized so far
};

struct PrepareSpeechSummary {
  SpeechCorpusInfo info;  // as written: utterances and frames per split
  std::array<int64_t, kSpeechSplitCount> dropped{};  // longer than max_frames, per split
  uint64_t file_bytes = 0;
};

// UserError for bad options, a missing text file or espeak-ng, an unknown voice.
PrepareSpeechSummary prepare_speech(
    const PrepareSpeechOptions& options,
    const std::function<void(const PrepareSpeechProgress&)>& on_progress = {});

}  // namespace pipetrain::speech
