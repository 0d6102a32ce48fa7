#pragma once
// The text side of the synthesized speech corpus: which lines are spoken, normalised to a small
// character set, and the character vocabulary their labels come from. No libtorch here.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace pipetrain::speech {

// Lowercase letters, space and apostrophe; anything else becomes a space; runs of spaces collapse
// and the ends are trimmed. "First Citizen: Speak, speak." -> "first citizen speak speak".
std::string normalize_speech_text(std::string_view line);

// Entry 0 is the transducer's blank (never a label); then space, apostrophe, 'a'..'z'.
const std::vector<std::string>& character_vocabulary();
std::vector<uint32_t> character_labels(std::string_view normalized_text);  // ids >= 1
std::string text_of_labels(const std::vector<uint32_t>& labels);

struct LineSelection {
  int min_words = 2;
  int max_words = 8;
  int64_t train_lines = 0;
  int64_t validation_lines = 0;
  int64_t test_lines = 0;
  uint64_t seed = 1;
};

// Distinct normalised lines, so a held-out sentence never appears in training.
struct SelectedLines {
  std::vector<std::string> train, validation, test;
};

// The distinct lines of `text` with min..max words (speaker tags such as "KING RICHARD III:"
// left out), shuffled by the seed; validation and test take theirs first, training the rest.
// UserError when the text has fewer lines than asked for.
SelectedLines select_speech_lines(const std::string& text, const LineSelection& selection);

// A small deterministic generator whose sequence is fixed by the seed on every platform
// (std:: distributions are not): SplitMix64.
class SpeechRandom {
 public:
  explicit SpeechRandom(uint64_t seed) : state_(seed) {}
  uint64_t next();
  int64_t uniform(int64_t low, int64_t high);  // inclusive
 private:
  uint64_t state_;
};

}  // namespace pipetrain::speech
