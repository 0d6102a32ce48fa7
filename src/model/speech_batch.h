#pragma once
// Utterances of a speech feature file (speech/feature_file.h) as the fixed-shape tensors a
// pipeline needs (receivers allocate from the model's specs; Gloo aborts on a size mismatch):
//   inputs [rows, max_frames, mel_bins + 1] in the model's dtype: each utterance's log-mel
//     features normalised per mel bin over its own frames (mean 0, deviation 1), zero past its
//     end; the last channel its frame mask (1 within the utterance, 0 past its end: exact in
//     every dtype, model/transducer_layers.h);
//   labels [rows, 1 + max_labels] int64: the label count, then the labels, zero-padded.
#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "model/batch_source.h"
#include "speech/feature_file.h"

namespace pipetrain {

struct SpeechBatchShape {
  int64_t max_frames = 0;  // model.seq_len
  int64_t max_labels = 0;  // model.max_labels
};

// The frame counts (the ones of channel mel_bins) and label counts (column 0) of a batch.
torch::Tensor speech_frame_counts(const torch::Tensor& inputs);
torch::Tensor speech_label_counts(const torch::Tensor& labels);

class SpeechBatchSource : public BatchSource {
 public:
  // UserError (one line) for a missing or corrupt file, an utterance longer than the shape
  // allows, a label outside the vocabulary, or a vocabulary other than the character one.
  SpeechBatchSource(const std::string& path, SpeechBatchShape shape, speech::SpeechSplit val_split,
                    torch::ScalarType dtype);
  // The training split in a fresh order each epoch (a permutation seeded by (seed, epoch)):
  // step s takes rows [s * rows, (s + 1) * rows) of that endless sequence.
  Microbatch train_batch(uint64_t seed, int64_t step, int64_t rows) const override;
  // Rows [index * rows, (index + 1) * rows) of the validation split (data.val_split), wrapping.
  Microbatch val_batch(int64_t index, int64_t rows) const override;
  std::string describe() const override;
  int64_t tokens_per_row() const override { return 1; }  // utterances/s
  std::string throughput_unit() const override { return "utterances"; }

 private:
  Microbatch gather(speech::SpeechSplit split, const std::vector<int64_t>& indices) const;
  std::unique_ptr<speech::SpeechFeatureFile> file_;
  SpeechBatchShape shape_;
  speech::SpeechSplit val_split_;
  torch::ScalarType dtype_;
  std::string path_;
};

}  // namespace pipetrain
