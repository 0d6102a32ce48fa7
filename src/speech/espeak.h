#pragma once
// Speech synthesis in process with espeak-ng's library. The library is loaded at run time
// (dlopen), so pipetrain starts without it and only the commands that speak say which Debian
// package to install. espeak-ng keeps global state: one Espeak per process, calls serialized.
// That state carries from one utterance to the next (the same text and voice spoken twice in a
// row differ) and has no reset: EspeakProcess speaks in a fresh child process for that reason.
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace pipetrain::speech {

struct SpokenVoice {
  std::string voice;  // espeak-ng voice and variant, e.g. "en-us+f2"
  int rate_wpm = 175;  // words per minute (espeak-ng's 80..450)
  int pitch = 50;      // base pitch, 0..100
};

// Overrides the library name that is loaded (tests point it at a missing file).
inline constexpr const char* kEspeakLibraryVariable = "PIPETRAIN_ESPEAK_LIBRARY";

// UserError naming the Debian package unless espeak-ng's library can be loaded (nothing spoken).
void require_espeak_library();

class Espeak {
 public:
  // The process's synthesizer, loaded and initialized on first use; UserError naming the Debian
  // package when the library or its voice data is missing.
  static Espeak& instance();

  int sample_rate() const { return sample_rate_; }  // 22050 for espeak-ng
  // 16-bit mono samples of `text` spoken with `voice`; UserError for an unknown voice.
  std::vector<int16_t> speak(const std::string& text, const SpokenVoice& voice);

 private:
  Espeak();
  struct Functions;
  const Functions* functions_ = nullptr;
  int sample_rate_ = 0;
  std::mutex mutex_;
};

// Speaks `items` in order in a child process forked for the purpose (one fresh espeak-ng per
// run, so the same list always gives the same audio) and hands back each one's samples in order.
class EspeakProcess {
 public:
  struct Item {
    std::string text;
    SpokenVoice voice;
  };
  explicit EspeakProcess(std::vector<Item> items);
  ~EspeakProcess();  // ends and reaps an unfinished child
  EspeakProcess(const EspeakProcess&) = delete;
  EspeakProcess& operator=(const EspeakProcess&) = delete;

  int sample_rate() const { return sample_rate_; }
  // The next item's samples; UserError carrying the child's error (an unknown voice, ...).
  std::vector<int16_t> next();

 private:
  void read_exactly(void* data, size_t bytes);
  int pid_ = -1;
  int fd_ = -1;
  int sample_rate_ = 0;
  size_t remaining_ = 0;
};

}  // namespace pipetrain::speech
