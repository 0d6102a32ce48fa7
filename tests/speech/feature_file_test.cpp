// The speech feature file: exact round trip, atomic write, and one clear line per bad input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <cstring>

#include "core/error.h"
#include "io/crc32c.h"
#include "speech/feature_file.h"
#include "../file_test_helpers.h"

namespace pipetrain::speech {
namespace {

namespace fs = std::filesystem;

fs::path speech_file_dir(const std::string& name) { return test::fresh_folder("pipetrain_speech_" + name); }

SpeechCorpusInfo small_corpus_info() {
  SpeechCorpusInfo info;
  info.mel_bins = 3;
  info.max_frames = 50;
  info.vocabulary = {"<blank>", " ", "a", "b"};
  info.voices = {"en-us+m1", "en+f1", "en-us+m5"};
  return info;
}

// Ragged utterances in every split; values fixed by a seeded generator.
std::vector<SpeechUtterance> small_corpus(int64_t label_override = -1) {
  auto generator = at::detail::createCPUGenerator(42);
  std::vector<SpeechUtterance> utterances;
  const int per_split[kSpeechSplitCount] = {3, 1, 2, 1};
  int64_t n = 0;
  for (int s = 0; s < kSpeechSplitCount; ++s) {
    for (int i = 0; i < per_split[s]; ++i, ++n) {
      SpeechUtterance u;
      u.split = SpeechSplit(s);
      u.voice = uint32_t(n % 3);
      u.text_line = uint32_t(i);
      u.features = torch::randn({5 + 7 * n, 3}, generator, torch::kFloat32);
      u.labels = torch::tensor(std::vector<int64_t>(size_t(1 + n % 4), 1 + n % 3), torch::kInt64);
      utterances.push_back(u);
    }
  }
  if (label_override >= 0) utterances[2].labels[0] = label_override;
  return utterances;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Opening `path` must fail with one line holding `fragment`.
void expect_speech_file_error(const fs::path& path, const std::string& fragment,
                              const SpeechReadOptions& options = {}) {
  try {
    SpeechFeatureFile file(path.string(), options);
    ADD_FAILURE() << "opened " << path << " without error, expected: " << fragment;
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(SpeechFeatureFile, RoundTripGivesIdenticalTensorsAndHeader) {
  const auto path = speech_file_dir("round_trip") / "corpus.bin";
  const auto written = small_corpus();
  write_speech_features(path.string(), small_corpus_info(), written);
  const SpeechFeatureFile file(path.string());
  const SpeechCorpusInfo& info = file.info();
  EXPECT_EQ(info.mel_bins, 3u);
  EXPECT_EQ(info.max_frames, 50u);
  EXPECT_EQ(info.vocabulary, small_corpus_info().vocabulary);
  EXPECT_EQ(info.voices, small_corpus_info().voices);
  EXPECT_EQ(info.utterances, (std::array<uint64_t, kSpeechSplitCount>{3, 1, 2, 1}));
  // frames 5 + 7n: train n = 0..2, validation 3, test 4..5, unseen-voice 6
  EXPECT_EQ(info.frames, (std::array<uint64_t, kSpeechSplitCount>{36, 26, 73, 47}));
  EXPECT_DOUBLE_EQ(info.hours(SpeechSplit::test), 73 * 160 / 16000.0 / 3600);
  size_t n = 0;
  for (int s = 0; s < kSpeechSplitCount; ++s) {
    const auto split = SpeechSplit(s);
    const auto loaded = file.load_split(split);
    ASSERT_EQ(int64_t(loaded.size()), file.count(split));
    for (const SpeechUtterance& u : loaded) {
      const SpeechUtterance& w = written[n++];
      EXPECT_EQ(u.split, w.split);
      EXPECT_EQ(u.voice, w.voice);
      EXPECT_EQ(u.text_line, w.text_line);
      EXPECT_EQ(u.features.dtype(), torch::kFloat32);
      EXPECT_EQ(u.labels.dtype(), torch::kInt64);
      EXPECT_TRUE(torch::equal(u.features, w.features)) << n;
      EXPECT_TRUE(torch::equal(u.labels, w.labels)) << n;
    }
  }
  EXPECT_EQ(n, written.size());
}

TEST(SpeechFeatureFile, WriteLeavesOnlyTheFinishedFile) {
  const auto dir = speech_file_dir("atomic");
  write_speech_features((dir / "corpus.bin").string(), small_corpus_info(), small_corpus());
  write_speech_features((dir / "corpus.bin").string(), small_corpus_info(), small_corpus());
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"corpus.bin"});
}

TEST(SpeechFeatureFile, MissingFileIsOneLine) {
  expect_speech_file_error(speech_file_dir("missing") / "none.bin",
                           "cannot read speech feature file");
}

TEST(SpeechFeatureFile, TruncatedFileIsOneLine) {
  const auto path = speech_file_dir("truncated") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  const std::string bytes = read_bytes(path);
  write_bytes(path, bytes.substr(0, bytes.size() - 10));
  expect_speech_file_error(path, fmt::format("is truncated: {} bytes of the {}", bytes.size() - 10,
                                             bytes.size()));
  write_bytes(path, bytes.substr(0, 5));
  expect_speech_file_error(path, "is truncated: 5 bytes");
}

TEST(SpeechFeatureFile, WrongMagicIsOneLine) {
  const auto path = speech_file_dir("magic") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  std::string bytes = read_bytes(path);
  bytes[0] = 'X';
  write_bytes(path, bytes);
  expect_speech_file_error(path, "is not a pipetrain speech feature file");
  write_bytes(path, "");
  expect_speech_file_error(path, "is not a pipetrain speech feature file");
}

TEST(SpeechFeatureFile, WrongVersionIsOneLine) {
  const auto path = speech_file_dir("version") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  std::string bytes = read_bytes(path);
  bytes[8] = 2;  // the u32 version follows the 8-byte magic
  write_bytes(path, bytes);
  expect_speech_file_error(path, "has format version 2; this pipetrain reads version 1");
}

TEST(SpeechFeatureFile, FlippedBitIsACrcMismatch) {
  const auto path = speech_file_dir("crc") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  std::string bytes = read_bytes(path);
  bytes[bytes.size() - 20] ^= 0x10;  // inside the last utterance's features
  write_bytes(path, bytes);
  expect_speech_file_error(path, "is corrupt: CRC32C");
}

// Split counts crafted so their sum wraps to the true total, with the CRC recomputed: the file
// passed every check and indexed past its entries (a segfault). Each count is checked alone.
TEST(SpeechFeatureFile, SplitCountsThatWrapAreCorruptNotACrash) {
  const auto path = speech_file_dir("wrap") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  std::string bytes = read_bytes(path);
  constexpr size_t kCounts = 8 + 4 + 8 + 7 * 4;  // magic, version, size, 7 uint32 fields
  uint64_t counts[kSpeechSplitCount];
  std::memcpy(counts, bytes.data() + kCounts, sizeof counts);
  ASSERT_EQ(counts[0], 3u);  // the layout this test edits
  const uint64_t wrapped[kSpeechSplitCount] = {UINT64_MAX, counts[0] + counts[1] + 1, counts[2], counts[3]};
  std::memcpy(bytes.data() + kCounts, wrapped, sizeof wrapped);
  const uint32_t crc = crc32c(std::string_view(bytes.data(), bytes.size() - 4));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  write_bytes(path, bytes);
  expect_speech_file_error(path, "is corrupt: its train split counts 18446744073709551615 utterances");
}

// Frames and mel bins crafted so each utterance's feature bytes (4 x 2^31 x 2^31) wrap around
// to 0, with the CRC recomputed: every size check passed and reading an utterance ran past the
// mapping. The product is checked before it is formed.
TEST(SpeechFeatureFile, FeatureSizesThatWrapAreCorruptNotACrash) {
  const auto path = speech_file_dir("wrap_frames") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  std::string bytes = read_bytes(path);
  constexpr size_t kMelBins = 8 + 4 + 8;  // magic, version, size
  const uint32_t first_entry[4] = {5, 1, 0, 0};  // frames, labels, voice, text line
  const size_t entries = bytes.find(std::string(reinterpret_cast<const char*>(first_entry), sizeof first_entry));
  ASSERT_NE(entries, std::string::npos);  // the layout this test edits
  const uint32_t huge = 1u << 31;
  std::memcpy(bytes.data() + kMelBins, &huge, 4);
  for (size_t i = 0; i < 7; ++i) std::memcpy(bytes.data() + entries + 16 * i, &huge, 4);
  const uint32_t crc = crc32c(std::string_view(bytes.data(), bytes.size() - 4));
  std::memcpy(bytes.data() + bytes.size() - 4, &crc, 4);
  write_bytes(path, bytes);
  expect_speech_file_error(path, "is corrupt: its header describes more data than the file holds");
}

TEST(SpeechFeatureFile, LabelOutsideTheVocabularyIsOneLine) {
  const auto path = speech_file_dir("label") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus(4));
  expect_speech_file_error(path,
                           "utterance 2 of train has label 4, outside the vocabulary (ids 1..3");
  write_speech_features(path.string(), small_corpus_info(), small_corpus(0));  // the blank
  expect_speech_file_error(path, "utterance 2 of train has label 0, outside the vocabulary");
}

TEST(SpeechFeatureFile, UtteranceLongerThanTheMaximumIsOneLine) {
  const auto path = speech_file_dir("long") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  SpeechReadOptions options;
  options.max_frames = 40;  // validation's utterance has 26 frames, test's second 40, then 47
  expect_speech_file_error(path, "utterance 0 of unseen-voice has 47 frames, more than the "
                                 "maximum 40", options);
  options.max_frames = 47;
  EXPECT_EQ(SpeechFeatureFile(path.string(), options).count(SpeechSplit::unseen_voice), 1);
}

TEST(SpeechFeatureFile, UtteranceWithMoreLabelsThanTheMaximumIsOneLine) {
  const auto path = speech_file_dir("many_labels") / "corpus.bin";
  write_speech_features(path.string(), small_corpus_info(), small_corpus());
  SpeechReadOptions options;
  options.max_labels = 3;  // utterance n has 1 + n % 4 labels: validation's (n = 3) has 4
  expect_speech_file_error(path, "utterance 0 of validation has 4 labels, more than the maximum 3",
                           options);
  options.max_labels = 4;
  EXPECT_EQ(SpeechFeatureFile(path.string(), options).count(SpeechSplit::validation), 1);
}

}  // namespace
}  // namespace pipetrain::speech
