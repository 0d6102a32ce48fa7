#include "speech/prepare_speech.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/stop_signal.h"
#include "speech/resample.h"

namespace pipetrain::speech {
namespace {

SpokenVoice draw_spoken_voice(const std::string& name, const PrepareSpeechOptions& options,
                              SpeechRandom& random) {
  SpokenVoice voice;
  voice.voice = name;
  voice.rate_wpm = int(random.uniform(options.rate_min, options.rate_max));
  voice.pitch = int(random.uniform(options.pitch_min, options.pitch_max));
  return voice;
}

void check_prepare_options(const PrepareSpeechOptions& o) {
  const LineSelection& l = o.lines;
  if (l.min_words < 1 || l.max_words < l.min_words) {
    fail("speech lines need 1 <= --min-words <= --max-words, got {} and {}", l.min_words,
         l.max_words);
  }
  if (l.train_lines < 1 || l.validation_lines < 1 || l.test_lines < 1) {
    fail("--train-lines, --validation-lines and --test-lines must be >= 1");
  }
  if (o.training_voices.empty()) fail("give at least one training voice");
  if (o.train_renditions < 1 || o.train_renditions > int(o.training_voices.size())) {
    fail("--renditions must be between 1 and the {} training voices, got {}",
         o.training_voices.size(), o.train_renditions);
  }
  for (const auto& voice : o.training_voices) {
    if (voice == o.unseen_voice) fail("the unseen voice '{}' is also a training voice", voice);
  }
  if (o.rate_min < 80 || o.rate_max > 450 || o.rate_min > o.rate_max) {
    fail("speaking rates must lie in espeak-ng's 80..450 words per minute, min <= max");
  }
  if (o.pitch_min < 0 || o.pitch_max > 100 || o.pitch_min > o.pitch_max) {
    fail("pitches must lie in espeak-ng's 0..100, min <= max");
  }
  if (o.max_frames < 1) fail("--max-frames must be >= 1, got {}", o.max_frames);
  if (o.threads < 1) fail("--threads must be >= 1, got {}", o.threads);
  if (o.out_path.empty()) fail("prepare-speech needs --out FILE");
}

struct SynthesizedUtterance {
  torch::Tensor features;  // [frames, mel_bins]
  double audio_seconds = 0;
};

// Audio read from espeak-ng in plan order, waiting for a feature thread. The first error (from
// either side) ends the work.
class SpeechWorkQueue {
 public:
  using Audio = std::pair<size_t, std::vector<int16_t>>;  // plan index, 16-bit samples

  explicit SpeechWorkQueue(size_t most_waiting) : most_waiting_(most_waiting) {}

  // Waits for room; false when the work ended meanwhile (a feature thread failed).
  bool push(size_t index, std::vector<int16_t> pcm) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return waiting_.size() < most_waiting_ || finished_; });
    if (finished_) return false;
    waiting_.emplace_back(index, std::move(pcm));
    changed_.notify_all();
    return true;
  }

  // The next audio, or nothing once the work has ended and no audio waits. `lock` holds mutex().
  std::optional<Audio> pop(std::unique_lock<std::mutex>& lock) {
    changed_.wait(lock, [&] { return !waiting_.empty() || finished_; });
    if (waiting_.empty()) return std::nullopt;
    Audio audio = std::move(waiting_.front());
    waiting_.pop_front();
    changed_.notify_all();
    return audio;
  }

  void fail(std::exception_ptr error) {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (!error_) error_ = std::move(error);
    end_locked();
  }

  void finish() {
    const std::lock_guard<std::mutex> lock(mutex_);
    end_locked();
  }

  void rethrow_error() const {
    if (error_) std::rethrow_exception(error_);
  }

  std::mutex& mutex() { return mutex_; }

 private:
  void end_locked() {
    finished_ = true;
    changed_.notify_all();
  }

  const size_t most_waiting_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Audio> waiting_;
  bool finished_ = false;
  std::exception_ptr error_;
};

// What the feature threads share: their inputs, and the results and progress (under the queue's
// mutex).
struct FeatureWork {
  const PrepareSpeechOptions& options;
  int espeak_rate;
  torch::Tensor filterbank;
  std::vector<SynthesizedUtterance>& results;
  PrepareSpeechProgress progress;
  const std::function<void(const PrepareSpeechProgress&)>& on_progress;
};

SynthesizedUtterance features_of(const std::vector<int16_t>& pcm, const FeatureWork& work) {
  SynthesizedUtterance made;
  const auto audio = resample_pcm16(pcm, work.espeak_rate, work.options.features.sample_rate);
  made.audio_seconds = double(audio.size()) / work.options.features.sample_rate;
  made.features = log_mel(audio, work.filterbank, work.options.features);
  return made;
}

// A feature thread: resamples and computes features until the queue ends; an error ends the work.
void compute_features(SpeechWorkQueue& queue, FeatureWork& work) {
  torch::NoGradGuard no_grad;
  std::unique_lock<std::mutex> lock(queue.mutex());
  while (std::optional<SpeechWorkQueue::Audio> audio = queue.pop(lock)) {
    lock.unlock();
    SynthesizedUtterance made;
    try {
      made = features_of(audio->second, work);
    } catch (...) {
      queue.fail(std::current_exception());
      return;
    }
    lock.lock();
    SynthesizedUtterance& result = work.results[audio->first];
    result = std::move(made);
    ++work.progress.done;
    work.progress.audio_seconds += result.audio_seconds;
    if (work.on_progress) work.on_progress(work.progress);
  }
}

// espeak-ng speaks the plan in order in its own process (so the audio depends on the seed only);
// `threads` threads resample and compute features meanwhile, storing results by plan index.
std::vector<SynthesizedUtterance> synthesize_plan(
    const std::vector<PlannedUtterance>& plan, const PrepareSpeechOptions& options,
    const std::function<void(const PrepareSpeechProgress&)>& on_progress) {
  std::vector<EspeakProcess::Item> items;
  for (const auto& planned : plan) items.push_back({planned.text, planned.voice});
  EspeakProcess espeak(std::move(items));
  std::vector<SynthesizedUtterance> results(plan.size());
  FeatureWork work{options, espeak.sample_rate(), mel_filterbank(options.features).to(torch::kFloat32),
                   results, {}, on_progress};
  work.progress.total = int64_t(plan.size());
  SpeechWorkQueue queue(4 * size_t(options.threads));
  std::vector<std::thread> workers;
  for (int t = 0; t < options.threads; ++t) {
    workers.emplace_back([&] { compute_features(queue, work); });
  }
  size_t spoken = 0;
  for (; spoken < plan.size() && stop_signal() == 0; ++spoken) {
    std::vector<int16_t> pcm;
    try {
      pcm = espeak.next();
    } catch (...) {
      queue.fail(std::current_exception());
      break;
    }
    if (!queue.push(spoken, std::move(pcm))) break;
  }
  queue.finish();
  for (auto& worker : workers) worker.join();
  queue.rethrow_error();
  if (const int signal = stop_signal(); signal != 0 && spoken < plan.size()) {  // (espeak's process: killed)
    throw StopRequested{signal, fmt::format("prepare-speech: stopped by {} after {} of {} utterances; nothing "
                                            "written", stop_signal_name(signal), spoken, plan.size())};
  }
  return results;
}

}  // namespace

std::vector<PlannedUtterance> plan_speech_utterances(const SelectedLines& lines,
                                                     const PrepareSpeechOptions& options) {
  SpeechRandom random(options.lines.seed ^ 0x5eec4u);
  const auto voice_count = uint32_t(options.training_voices.size());
  std::vector<PlannedUtterance> plan;
  auto add = [&](SpeechSplit split, size_t line, const std::string& text, uint32_t voice_index) {
    const std::string& name =
        voice_index < voice_count ? options.training_voices[voice_index] : options.unseen_voice;
    plan.push_back({split, uint32_t(line), text, voice_index,
                    draw_spoken_voice(name, options, random)});
  };
  std::vector<uint32_t> voices(voice_count);
  for (size_t line = 0; line < lines.train.size(); ++line) {
    for (uint32_t v = 0; v < voice_count; ++v) voices[v] = v;
    for (int r = 0; r < options.train_renditions; ++r) {  // distinct voices: a partial shuffle
      std::swap(voices[size_t(r)], voices[size_t(random.uniform(r, voice_count - 1))]);
      add(SpeechSplit::train, line, lines.train[line], voices[size_t(r)]);
    }
  }
  for (size_t line = 0; line < lines.validation.size(); ++line) {
    add(SpeechSplit::validation, line, lines.validation[line],
        uint32_t(random.uniform(0, voice_count - 1)));
  }
  for (size_t line = 0; line < lines.test.size(); ++line) {
    add(SpeechSplit::test, line, lines.test[line], uint32_t(random.uniform(0, voice_count - 1)));
  }
  for (size_t line = 0; line < lines.test.size(); ++line) {
    add(SpeechSplit::unseen_voice, line, lines.test[line], voice_count);
  }
  return plan;
}

namespace {

// Before minutes of synthesis: the output's folder (made if missing) takes the file.
void prepare_output(const std::string& out_path) {
  const auto parent = std::filesystem::path(out_path).parent_path();
  std::error_code error;
  if (!parent.empty()) std::filesystem::create_directories(parent, error);
  if (error) fail("cannot create folder '{}': {}", parent.string(), error.message());
  require_writable_output(out_path, "--out");
}

// A file without training or validation utterances trains nothing: one line saying why, instead
// of a file that every run refuses.
void require_train_and_validation(const SpeechCorpusInfo& info, const PrepareSpeechSummary& summary,
                                  int64_t max_frames) {
  for (const SpeechSplit split : {SpeechSplit::train, SpeechSplit::validation}) {
    const size_t s = size_t(split);
    if (info.utterances[s] > 0) continue;
    fail("prepare-speech: no {} utterance fits --max-frames {} ({} longer ones dropped); raise "
         "--max-frames", speech_split_name(split), max_frames, summary.dropped[s]);
  }
}

// Every voice tried on one word in a child of its own before minutes of synthesis: an unknown
// one (the unseen voice speaks only the test lines, last) is one line at once, and the run's own
// child still starts fresh (its audio depends on the seed only).
void require_known_voices(const PrepareSpeechOptions& options) {
  std::vector<EspeakProcess::Item> items;
  for (const auto& voice : options.training_voices) items.push_back({"a", {voice}});
  items.push_back({"a", {options.unseen_voice}});
  EspeakProcess probe(items);
  for (size_t i = 0; i < items.size(); ++i) probe.next();
}

}  // namespace

PrepareSpeechSummary prepare_speech(
    const PrepareSpeechOptions& options,
    const std::function<void(const PrepareSpeechProgress&)>& on_progress) {
  check_prepare_options(options);
  prepare_output(options.out_path);
  require_known_voices(options);
  const std::string text = read_regular_file(options.text_path, "text file");
  const SelectedLines lines = select_speech_lines(text, options.lines);
  const std::vector<PlannedUtterance> plan = plan_speech_utterances(lines, options);
  std::vector<SynthesizedUtterance> made = synthesize_plan(plan, options, on_progress);

  PrepareSpeechSummary summary;
  SpeechCorpusInfo& info = summary.info;
  info.mel_bins = uint32_t(options.features.mel_bins);
  info.sample_rate = uint32_t(options.features.sample_rate);
  info.win_length = uint32_t(options.features.win_length);
  info.hop_length = uint32_t(options.features.hop_length);
  info.max_frames = uint32_t(options.max_frames);
  info.vocabulary = character_vocabulary();
  info.voices = options.training_voices;
  info.voices.push_back(options.unseen_voice);
  std::vector<SpeechUtterance> kept;
  for (size_t i = 0; i < plan.size(); ++i) {
    const int64_t frames = made[i].features.size(0);
    if (frames > options.max_frames || frames == 0) {
      ++summary.dropped[size_t(plan[i].split)];
      continue;
    }
    const std::vector<uint32_t> labels = character_labels(plan[i].text);
    SpeechUtterance u;
    u.split = plan[i].split;
    u.voice = plan[i].voice_index;
    u.text_line = plan[i].text_line;
    u.features = std::move(made[i].features);
    u.labels = torch::tensor(std::vector<int64_t>(labels.begin(), labels.end()), torch::kInt64);
    info.frames[size_t(u.split)] += uint64_t(frames);
    ++info.utterances[size_t(u.split)];
    kept.push_back(std::move(u));
  }
  require_train_and_validation(info, summary, options.max_frames);
  write_speech_features(options.out_path, info, kept);
  summary.file_bytes = std::filesystem::file_size(options.out_path);
  return summary;
}

}  // namespace pipetrain::speech
