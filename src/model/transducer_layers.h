#pragma once
// The transducer's layers (model/transducer.h): [rows, frames, width + 1] in and out, the last
// channel each utterance's frame mask (1 within it, 0 past its end).
#include <cstdint>
#include <memory>
#include <utility>

#include <torch/torch.h>

#include "loss/joint_network.h"
#include "model/transducer.h"

namespace pipetrain {

class TransducerLayer : public torch::nn::Module {
 public:
  virtual torch::Tensor forward(const torch::Tensor& x) = 0;
};

// Splits an activation into its values [rows, frames, width] and frame counts [rows] (int64),
// the ones of its mask channel counted. A mask, not the count itself, so that it stays exact in
// every dtype: bfloat16 holds the integers only up to 256, and an activation crossing a layer
// boundary under mixed precision is rounded to it (device/precision.h).
std::pair<torch::Tensor, torch::Tensor> split_frame_counts(const torch::Tensor& x);
// The inverse: the mask appended as the last channel (no gradient flows into it).
torch::Tensor with_frame_counts(const torch::Tensor& values, const torch::Tensor& counts);

// The last layer: projects the encoder output into the joint dimension (its forward); the
// predictor and the joint network serve the loss and decoding.
class TransducerJoint : public TransducerLayer {
 public:
  explicit TransducerJoint(const TransducerConfig& config);
  torch::Tensor forward(const torch::Tensor& x) override;
  // Predictor outputs [rows, labels + 1, d_model] for [blank, labels...] (blank starts).
  torch::Tensor predict(const torch::Tensor& labels);
  // One predictor step from `state` for token `token`: its output [d_model] and the new state.
  using PredictorState = std::tuple<torch::Tensor, torch::Tensor>;
  torch::Tensor predict_step(int64_t token, PredictorState& state);
  PredictorState initial_state() const;

  loss::JointNetwork network{nullptr};

 private:
  TransducerConfig config_;
  torch::nn::Linear encoder_projection_{nullptr}, predictor_projection_{nullptr};
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
};

// Layer `layer` of the model with its initial weights from `generator`.
std::shared_ptr<TransducerLayer> make_transducer_layer(const TransducerConfig& config,
                                                       int64_t layer, torch::Generator& generator);

}  // namespace pipetrain
