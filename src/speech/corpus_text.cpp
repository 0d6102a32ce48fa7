#include "speech/corpus_text.h"

#include <algorithm>
#include <set>
#include <sstream>

#include "core/error.h"

namespace pipetrain::speech {
namespace {

int count_words(const std::string& normalized) {
  if (normalized.empty()) return 0;
  return 1 + int(std::count(normalized.begin(), normalized.end(), ' '));
}

// "KING RICHARD III:" and "First Citizen:" name who speaks; they are not speech.
bool is_speaker_tag(std::string_view line) {
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.remove_suffix(1);
  return !line.empty() && line.back() == ':';
}

template <typename Item>
void shuffle_with(std::vector<Item>& items, SpeechRandom& random) {
  for (size_t i = items.size(); i > 1; --i) {
    std::swap(items[i - 1], items[size_t(random.uniform(0, int64_t(i) - 1))]);
  }
}

std::vector<std::string> take_lines(const std::vector<std::string>& lines, size_t& next,
                                    int64_t count) {
  std::vector<std::string> taken(lines.begin() + long(next), lines.begin() + long(next + count));
  next += size_t(count);
  return taken;
}

}  // namespace

std::string normalize_speech_text(std::string_view line) {
  std::string out;
  for (const char raw : line) {
    char c = raw;
    if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    const bool kept = (c >= 'a' && c <= 'z') || c == '\'';
    if (kept) {
      out.push_back(c);
    } else if (!out.empty() && out.back() != ' ') {
      out.push_back(' ');
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

const std::vector<std::string>& character_vocabulary() {
  static const std::vector<std::string> vocabulary = [] {
    std::vector<std::string> v{"<blank>", " ", "'"};
    for (char c = 'a'; c <= 'z'; ++c) v.emplace_back(1, c);
    return v;
  }();
  return vocabulary;
}

std::vector<uint32_t> character_labels(std::string_view normalized_text) {
  std::vector<uint32_t> labels;
  labels.reserve(normalized_text.size());
  for (const char c : normalized_text) {
    if (c == ' ') {
      labels.push_back(1);
    } else if (c == '\'') {
      labels.push_back(2);
    } else if (c >= 'a' && c <= 'z') {
      labels.push_back(uint32_t(3 + (c - 'a')));
    } else {
      fail("character '{}' is outside the speech vocabulary (normalize the text first)", c);
    }
  }
  return labels;
}

std::string text_of_labels(const std::vector<uint32_t>& labels) {
  const auto& vocabulary = character_vocabulary();
  std::string text;
  for (const uint32_t label : labels) text += label < vocabulary.size() ? vocabulary[label] : "?";
  return text;
}

SelectedLines select_speech_lines(const std::string& text, const LineSelection& selection) {
  std::vector<std::string> lines;
  std::set<std::string> seen;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (is_speaker_tag(line)) continue;
    std::string normalized = normalize_speech_text(line);
    const int words = count_words(normalized);
    if (words < selection.min_words || words > selection.max_words) continue;
    if (seen.insert(normalized).second) lines.push_back(std::move(normalized));
  }
  const int64_t wanted = selection.train_lines + selection.validation_lines + selection.test_lines;
  if (int64_t(lines.size()) < wanted) {
    fail("the text has {} distinct lines of {}-{} words, fewer than the {} asked for "
         "(train {} + validation {} + test {})",
         lines.size(), selection.min_words, selection.max_words, wanted, selection.train_lines,
         selection.validation_lines, selection.test_lines);
  }
  SpeechRandom random(selection.seed);
  shuffle_with(lines, random);
  SelectedLines selected;
  size_t next = 0;
  selected.validation = take_lines(lines, next, selection.validation_lines);
  selected.test = take_lines(lines, next, selection.test_lines);
  selected.train = take_lines(lines, next, selection.train_lines);
  return selected;
}

uint64_t SpeechRandom::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

int64_t SpeechRandom::uniform(int64_t low, int64_t high) {
  return low + int64_t(next() % uint64_t(high - low + 1));
}

}  // namespace pipetrain::speech
