#pragma once
// An RNN-T speech recognizer written as an ordered list of stage-cuttable layers:
//   layer 0            "subsample": two 3x3 convolutions of stride 2 over (frames, mel bins),
//                      4x fewer frames, projected to d_model, plus sinusoidal positions;
//   layers 1..L        "encoder<i>": pre-norm transformer blocks (attention masked to each
//                      utterance's frames);
//   layer L + 1        "joint": the encoder projection, the predictor (embedding + LSTM) and
//                      the joint network; the loss (sample-wise, or the batched reference).
// Every activation is [rows, frames, width + 1]: the last channel marks each utterance's frames
// (1 within, 0 past its end; inputs: model/speech_batch.h), so lengths cross every stage
// boundary and the last stage knows how many encoder frames each utterance has. Layer i is initialised
// from its own generator seeded by (seed, i), whichever stage builds it.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "device/precision.h"
#include "model/model.h"

namespace pipetrain {

struct TransducerConfig {
  int64_t encoder_layers = 2;  // model.layers
  int64_t d_model = 128;       // encoder width, predictor width and joint dimension
  int64_t heads = 4;
  int64_t max_frames = 400;  // model.seq_len: input frames (padded)
  int64_t max_labels = 80;   // model.max_labels: labels (padded)
  int64_t mel_bins = 80;
  int64_t vocabulary = 29;  // the speech character vocabulary; 0 is the blank
  bool sample_wise = true;  // model.transducer_loss
  device::Precision precision;             // model.dtype
  torch::ScalarType dtype = torch::kFloat32;  // the weights' (precision.parameter_dtype())

  int64_t layer_count() const { return encoder_layers + 2; }
  int64_t conv_channels() const { return std::max<int64_t>(1, d_model / 4); }
  // Frames after each stride-2 convolution (padding 1): ceil(frames / 2), twice.
  static int64_t subsampled(int64_t frames) { return (((frames + 1) / 2) + 1) / 2; }
  int64_t encoder_frames() const { return subsampled(max_frames); }
};

class TransducerLayer;  // model/transducer_layers.h
class TransducerJoint;

class TransducerStack : public StageModule {
 public:
  TransducerStack(const TransducerConfig& config, uint64_t seed, int64_t first, int64_t last);
  torch::Tensor forward(const torch::Tensor& input) override;
  // The mean transducer loss per utterance; labels [rows, 1 + max_labels] (count first).
  torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) override;
  // "cer": greedy decoding's character errors (edit distance) over the reference characters.
  std::vector<std::pair<std::string, double>> validation_measures(
      const torch::Tensor& output, const torch::Tensor& labels) override;
  std::string describe_examples(const Microbatch& batch, int64_t count) override;

 private:
  TransducerJoint& joint() const;
  std::vector<std::vector<int64_t>> decode(const torch::Tensor& output);
  TransducerConfig config_;
  std::vector<std::shared_ptr<TransducerLayer>> layers_;
};

}  // namespace pipetrain
