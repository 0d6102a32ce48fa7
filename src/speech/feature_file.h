#pragma once
// The cached speech corpus: log-mel features and character labels per utterance, in four splits.
// One binary file (docs/speech.md#the-feature-file), little-endian, 4-byte aligned:
//   "PTSPEECH" u32 version u64 file_bytes u32 mel_bins u32 sample_rate u32 win_length u32 hop_length
//   u32 max_frames u32 vocabulary_size u32 voice_count u64 utterances[4 splits]
//   strings: vocabulary then voices, each u32 length + bytes; zero padding to 4 bytes
//   table: per utterance u32 frames, u32 labels, u32 voice, u32 text_line (split order)
//   data: per utterance u32 labels[labels], f32 features[frames * mel_bins] (row-major)
//   u32 CRC32C of every byte before it
// Written atomically (temporary file + rename); read through mmap with one-line errors.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <torch/torch.h>

namespace pipetrain::speech {

enum class SpeechSplit : uint32_t { train = 0, validation = 1, test = 2, unseen_voice = 3 };
inline constexpr int kSpeechSplitCount = 4;
inline constexpr uint32_t kSpeechFileVersion = 1;
std::string_view speech_split_name(SpeechSplit split);  // "train", ..., "unseen-voice"

struct SpeechUtterance {
  SpeechSplit split = SpeechSplit::train;
  uint32_t voice = 0;      // index into SpeechCorpusInfo::voices
  uint32_t text_line = 0;  // index of the line within its split's text lines
  torch::Tensor features;  // [frames, mel_bins] float32
  torch::Tensor labels;    // [label count] int64, ids into the vocabulary (>= 1: 0 is blank)
};

struct SpeechCorpusInfo {
  uint32_t mel_bins = 80;
  uint32_t sample_rate = 16000;
  uint32_t win_length = 400;
  uint32_t hop_length = 160;
  uint32_t max_frames = 0;              // longer utterances were dropped at preparation
  std::vector<std::string> vocabulary;  // entry 0 is the blank
  std::vector<std::string> voices;      // espeak-ng voice of each voice index
  std::array<uint64_t, kSpeechSplitCount> utterances{};  // per split
  std::array<uint64_t, kSpeechSplitCount> frames{};      // per split (filled by the reader)
  double hours(SpeechSplit split) const;                 // frames * hop / sample_rate
};

// Utterances must be grouped by split in split order; `info.utterances` is computed here.
// Labels are written as given (the reader checks them against the vocabulary).
void write_speech_features(const std::string& path, SpeechCorpusInfo info,
                           const std::vector<SpeechUtterance>& utterances);

struct SpeechReadOptions {
  int64_t max_frames = 0;  // > 0: an utterance longer than this is a UserError
  int64_t max_labels = 0;  // > 0: an utterance with more labels than this is a UserError
  // What raises each maximum, named in the messages (a trainer's config field).
  std::string max_frames_setting = "the maximum";
  std::string max_labels_setting = "the maximum";
};

class SpeechByteCursor;

class SpeechFeatureFile {
 public:
  // Maps and checks the whole file (structure, CRC32C, labels, lengths): UserError naming the
  // path for a missing, truncated or corrupt file, a wrong magic or version, a label outside the
  // vocabulary, or an utterance longer than options.max_frames (or max_labels).
  explicit SpeechFeatureFile(const std::string& path, const SpeechReadOptions& options = {});
  ~SpeechFeatureFile();
  SpeechFeatureFile(const SpeechFeatureFile&) = delete;
  SpeechFeatureFile& operator=(const SpeechFeatureFile&) = delete;

  const SpeechCorpusInfo& info() const { return info_; }
  int64_t count(SpeechSplit split) const { return int64_t(info_.utterances[size_t(split)]); }
  SpeechUtterance utterance(SpeechSplit split, int64_t index) const;  // tensors own their data
  std::vector<SpeechUtterance> load_split(SpeechSplit split) const;

 private:
  struct Entry {
    uint32_t frames, labels, voice, text_line;
    uint64_t offset;  // of its labels in the file
  };
  void parse(const SpeechReadOptions& options);
  void check_envelope(SpeechByteCursor& cursor) const;
  uint64_t read_header(SpeechByteCursor& cursor);
  void read_entries(SpeechByteCursor& cursor, uint64_t total);
  void check_utterance(const Entry& e, SpeechSplit split, int64_t index,
                       const SpeechReadOptions& options) const;
  const Entry& entry(SpeechSplit split, int64_t index) const;

  std::string path_;
  const unsigned char* bytes_ = nullptr;
  uint64_t size_ = 0;
  SpeechCorpusInfo info_;
  std::vector<Entry> entries_;
  std::array<uint64_t, kSpeechSplitCount> first_{};  // first entry of each split
};

}  // namespace pipetrain::speech
