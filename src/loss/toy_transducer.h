#pragma once
// A tiny trainable transducer on generated data, for the example program and the training
// test. Task: the input is a frame sequence where each label is held for 1-3 frames, with
// optional silence frames (symbol 0) between labels; the output is the label sequence.
// Frame-to-label alignment is unknown to the model: exactly what the transducer loss handles.
#include <cstdint>
#include <vector>

#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include "loss/joint_network.h"

namespace pipetrain::loss {

struct ToyTransducerBatch {
  at::Tensor inputs;          // [B, T] int64 frame symbols, 0 = silence / padding
  at::Tensor input_lengths;   // [B]
  at::Tensor targets;         // [B, U] int64 labels in 1..num_labels, padded with 0
  at::Tensor target_lengths;  // [B]
};

// Deterministic for a given seed. Labels 1..num_labels; blank is 0 in the output vocabulary.
ToyTransducerBatch make_toy_transducer_batch(int64_t batch, int64_t num_labels,
                                             int64_t max_labels, uint64_t seed);

class ToyTransducerImpl : public torch::nn::Module {
 public:
  ToyTransducerImpl(int64_t num_labels, int64_t hidden, int64_t joint_dim);
  at::Tensor encode(const at::Tensor& inputs);    // [B, T] -> [B, T, J]
  at::Tensor predict(const at::Tensor& targets);  // [B, U] -> [B, U+1, J] (blank prepended)
  // Mean transducer loss over the batch, by the sample-wise method or the batched reference.
  at::Tensor loss(const ToyTransducerBatch& batch, bool sample_wise);
  // Greedy decoding of one sample (at most 3 labels per frame).
  std::vector<int64_t> greedy_decode(const at::Tensor& inputs, int64_t length);

  torch::nn::Embedding input_embedding{nullptr}, label_embedding{nullptr};
  torch::nn::LSTM encoder{nullptr}, predictor{nullptr};
  torch::nn::Linear encoder_projection{nullptr}, predictor_projection{nullptr};
  JointNetwork joint{nullptr};
};
TORCH_MODULE(ToyTransducer);

}  // namespace pipetrain::loss
