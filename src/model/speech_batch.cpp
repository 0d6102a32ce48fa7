#include "model/speech_batch.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"
#include "speech/corpus_text.h"

namespace pipetrain {
namespace {

// Per mel bin over the utterance's frames: mean 0, deviation 1 (a floor keeps silent bins finite).
torch::Tensor normalised_features(const torch::Tensor& features) {
  const auto as_double = features.to(torch::kFloat64);
  const auto mean = as_double.mean(0, true);
  const auto deviation = as_double.std(0, false, true).clamp_min(1e-3);
  return (as_double - mean) / deviation;
}

}  // namespace

torch::Tensor speech_frame_counts(const torch::Tensor& inputs) {
  return inputs.select(2, inputs.size(2) - 1).to(torch::kInt64).sum(1);
}

torch::Tensor speech_label_counts(const torch::Tensor& labels) { return labels.select(1, 0); }

SpeechBatchSource::SpeechBatchSource(const std::string& path, SpeechBatchShape shape,
                                     speech::SpeechSplit val_split, torch::ScalarType dtype)
    : shape_(shape), val_split_(val_split), dtype_(dtype), path_(path) {
  file_ = std::make_unique<speech::SpeechFeatureFile>(
      path, speech::SpeechReadOptions{shape.max_frames, shape.max_labels, "model.seq_len", "model.max_labels"});
  if (file_->info().vocabulary != speech::character_vocabulary()) {
    fail("speech feature file '{}' has the vocabulary [{}]; the transducer's is [{}]", path,
         join(file_->info().vocabulary, "|"), join(speech::character_vocabulary(), "|"));
  }
  for (const auto split : {speech::SpeechSplit::train, val_split}) {
    if (file_->count(split) == 0) {
      fail("speech feature file '{}' has no {} utterances", path, speech::speech_split_name(split));
    }
  }
}

Microbatch SpeechBatchSource::gather(speech::SpeechSplit split,
                                     const std::vector<int64_t>& indices) const {
  const auto rows = int64_t(indices.size());
  const int64_t bins = file_->info().mel_bins;
  auto inputs = torch::zeros({rows, shape_.max_frames, bins + 1}, torch::kFloat64);
  auto labels = torch::zeros({rows, 1 + shape_.max_labels}, torch::kInt64);
  for (int64_t r = 0; r < rows; ++r) {
    const auto u = file_->utterance(split, indices[size_t(r)]);
    const int64_t frames = u.features.size(0), count = u.labels.size(0);
    inputs[r].narrow(0, 0, frames).narrow(1, 0, bins).copy_(normalised_features(u.features));
    inputs[r].narrow(0, 0, frames).select(1, bins).fill_(1.0);
    labels[r][0] = count;
    labels[r].narrow(0, 1, count).copy_(u.labels);
  }
  return {inputs.to(dtype_), labels};
}

Microbatch SpeechBatchSource::train_batch(uint64_t seed, int64_t step, int64_t rows) const {
  const int64_t count = file_->count(speech::SpeechSplit::train);
  // Its own salt: speech and images draw different orders from one seed.
  return gather(speech::SpeechSplit::train, epoch_ordered_rows(seed, 0x5BEEC4u, step, rows, count));
}

Microbatch SpeechBatchSource::val_batch(int64_t index, int64_t rows) const {
  std::vector<int64_t> chosen;
  for (int64_t k = index * rows; k < (index + 1) * rows; ++k)
    chosen.push_back(k % file_->count(val_split_));
  return gather(val_split_, chosen);
}

std::string SpeechBatchSource::describe() const {
  const auto& info = file_->info();
  return fmt::format(
      "{} ({} training utterances, {:.2f} h; validation on {}: {} utterances, "
      "padded to {} frames and {} labels)",
      path_, file_->count(speech::SpeechSplit::train), info.hours(speech::SpeechSplit::train),
      speech::speech_split_name(val_split_), file_->count(val_split_), shape_.max_frames,
      shape_.max_labels);
}

}  // namespace pipetrain
