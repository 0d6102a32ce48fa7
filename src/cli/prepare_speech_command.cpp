// `pipetrain prepare-speech`: synthesizes the speech corpus with espeak-ng and writes its log-mel
// feature file (docs/speech.md).
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/stop_signal.h"
#include "core/text.h"
#include "speech/prepare_speech.h"

namespace pipetrain::cli {
namespace {

using SpeechClock = std::chrono::steady_clock;

double speech_seconds_since(SpeechClock::time_point start) {
  return std::chrono::duration<double>(SpeechClock::now() - start).count();
}

// "prepare-speech: 1200/4600 utterances (26%), 0.71 h of audio, 85 utt/s, ETA 40s": in place on
// a terminal, otherwise one line per tenth of the corpus.
class SpeechProgressLine {
 public:
  explicit SpeechProgressLine(std::FILE* out) : out_(out), tty_(::isatty(::fileno(out)) != 0) {}
  void update(const speech::PrepareSpeechProgress& p) {
    const int tenth = int(10 * p.done / std::max<int64_t>(p.total, 1));
    const bool due = tty_ ? speech_seconds_since(last_) > 0.2 || p.done == p.total
                          : tenth > last_tenth_;
    if (!due) return;
    const double rate = double(p.done) / std::max(speech_seconds_since(start_), 1e-9);
    const std::string line = fmt::format(
        "prepare-speech: {}/{} utterances ({}%), {:.2f} h of audio, {:.0f} utt/s, ETA {}", p.done,
        p.total, 100 * p.done / std::max<int64_t>(p.total, 1), p.audio_seconds / 3600, rate,
        format_duration(double(p.total - p.done) / std::max(rate, 1e-9)));
    if (tty_) {
      fmt::print(out_, "\r\033[K{}", line);
    } else {
      fmt::print(out_, "{}\n", line);
      last_tenth_ = tenth;
    }
    last_ = SpeechClock::now();
    std::fflush(out_);
  }
  ~SpeechProgressLine() {
    if (tty_) fmt::print(out_, "\n");
  }

 private:
  std::FILE* out_;
  bool tty_;
  int last_tenth_ = 0;
  SpeechClock::time_point start_ = SpeechClock::now();
  SpeechClock::time_point last_ = start_;
};

void print_speech_summary(const speech::PrepareSpeechOptions& options,
                          const speech::PrepareSpeechSummary& summary, double seconds) {
  const speech::SpeechCorpusInfo& info = summary.info;
  int64_t utterances = 0, dropped = 0;
  for (int s = 0; s < speech::kSpeechSplitCount; ++s) {
    utterances += int64_t(info.utterances[size_t(s)]);
    dropped += summary.dropped[size_t(s)];
  }
  fmt::print("prepare-speech: wrote {} ({}, {} utterances, vocabulary {}, {} log-mel bins at {} "
             "Hz) in {:.1f} s\n",
             options.out_path, format_bytes(double(summary.file_bytes)), utterances,
             info.vocabulary.size(), info.mel_bins, info.sample_rate, seconds);
  for (int s = 0; s < speech::kSpeechSplitCount; ++s) {
    const auto split = speech::SpeechSplit(s);
    const std::string voices = split == speech::SpeechSplit::unseen_voice
                                   ? fmt::format("voice {}, the test lines", options.unseen_voice)
                                   : fmt::format("{} training voices", options.training_voices.size());
    fmt::print("  {:<13}{:>6} utterances {:>7.3f} h  ({})\n", speech::speech_split_name(split),
               info.utterances[size_t(s)], info.hours(split), voices);
  }
  fmt::print("  dropped {} utterances longer than --max-frames {} ({:.1f} s)\n", dropped,
             options.max_frames, double(options.max_frames) * info.hop_length / info.sample_rate);
}

}  // namespace

void add_prepare_speech_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "prepare-speech", "Synthesize a speech corpus with espeak-ng into a log-mel feature file");
  auto options = std::make_shared<speech::PrepareSpeechOptions>();
  options->text_path = "data/tinyshakespeare.txt";
  options->out_path = "data/speech/features.bin";
  auto& lines = options->lines;
  cmd->add_option("--text", options->text_path, "lines to speak (UTF-8 text)")
      ->capture_default_str();
  cmd->add_option("--out", options->out_path, "the feature file to write")->capture_default_str();
  cmd->add_option("--seed", lines.seed, "fixes the lines, voices, speeds and pitches")
      ->capture_default_str();
  cmd->add_option("--train-lines", lines.train_lines, "distinct training lines")
      ->capture_default_str();
  cmd->add_option("--validation-lines", lines.validation_lines, "held-out validation lines")
      ->capture_default_str();
  cmd->add_option("--test-lines", lines.test_lines,
                  "held-out test lines (spoken again by the unseen voice)")
      ->capture_default_str();
  cmd->add_option("--renditions", options->train_renditions,
                  "distinct training voices per training line")
      ->capture_default_str();
  cmd->add_option("--min-words", lines.min_words, "shortest line, in words")->capture_default_str();
  cmd->add_option("--max-words", lines.max_words, "longest line, in words")->capture_default_str();
  cmd->add_option("--voices", options->training_voices,
                  "training voices, comma-separated (espeak-ng voice+variant; default " +
                      join(options->training_voices, ",") + ")")
      ->delimiter(',')
      ->check([](const std::string& voice) {
        return voice.find_first_of(" \t") == std::string::npos
                   ? std::string()
                   : "'" + voice + "' holds a space: separate voices with commas";
      });
  cmd->add_option("--unseen-voice", options->unseen_voice,
                  "the voice held out of training (the unseen-voice split)")
      ->capture_default_str();
  cmd->add_option("--max-frames", options->max_frames,
                  "drop utterances longer than this many 10 ms frames")
      ->capture_default_str();
  cmd->add_option("--threads", options->threads, "feature threads (espeak-ng speaks in a process of its own meanwhile)")
      ->capture_default_str();
  cmd->callback([options] {
    // A stop between utterances, with a line (SIGINT ignored, as in a script's `cmd &`, is
    // taken too: the handler replaces the ignore).
    install_stop_handlers();
    options->text_path = resolve_existing_path(options->text_path, PIPETRAIN_SOURCE_DIR);
    const auto start = SpeechClock::now();
    speech::PrepareSpeechSummary summary;
    {
      SpeechProgressLine progress(stderr);
      summary = speech::prepare_speech(
          *options, [&](const speech::PrepareSpeechProgress& p) { progress.update(p); });
    }
    print_speech_summary(*options, summary, speech_seconds_since(start));
  });
}

}  // namespace pipetrain::cli
