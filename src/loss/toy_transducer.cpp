// Tiny LSTM transducer and its generated data (see toy_transducer.h).
#include "loss/toy_transducer.h"

#include <torch/torch.h>

#include <algorithm>
#include <random>

#include "core/error.h"

namespace pipetrain::loss {

ToyTransducerBatch make_toy_transducer_batch(int64_t batch, int64_t num_labels,
                                             int64_t max_labels, uint64_t seed) {
  if (batch < 1 || num_labels < 1 || max_labels < 1) fail("toy transducer: sizes must be >= 1");
  std::mt19937_64 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<std::vector<int64_t>> frames(batch), labels(batch);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t count = uniform(1, max_labels);
    for (int64_t u = 0; u < count; ++u) {
      const int64_t label = uniform(1, num_labels);
      const bool repeat = !labels[b].empty() && labels[b].back() == label;
      if (repeat || uniform(0, 9) < 3) frames[b].push_back(0);  // silence separates labels
      for (int64_t r = uniform(1, 3); r > 0; --r) frames[b].push_back(label);
      labels[b].push_back(label);
    }
  }
  size_t t_max = 0, u_max = 0;
  for (int64_t b = 0; b < batch; ++b) {
    t_max = std::max(t_max, frames[b].size());
    u_max = std::max(u_max, labels[b].size());
  }
  ToyTransducerBatch out{torch::zeros({batch, int64_t(t_max)}, torch::kLong),
                         torch::empty({batch}, torch::kLong),
                         torch::zeros({batch, int64_t(u_max)}, torch::kLong),
                         torch::empty({batch}, torch::kLong)};
  for (int64_t b = 0; b < batch; ++b) {
    for (size_t t = 0; t < frames[b].size(); ++t) out.inputs[b][t] = frames[b][t];
    for (size_t u = 0; u < labels[b].size(); ++u) out.targets[b][u] = labels[b][u];
    out.input_lengths[b] = int64_t(frames[b].size());
    out.target_lengths[b] = int64_t(labels[b].size());
  }
  return out;
}

ToyTransducerImpl::ToyTransducerImpl(int64_t num_labels, int64_t hidden, int64_t joint_dim) {
  const int64_t vocab = num_labels + 1;  // blank = 0
  input_embedding = register_module("input_embedding", torch::nn::Embedding(vocab, hidden));
  label_embedding = register_module("label_embedding", torch::nn::Embedding(vocab, hidden));
  encoder = register_module(
      "encoder", torch::nn::LSTM(torch::nn::LSTMOptions(hidden, hidden).batch_first(true)));
  predictor = register_module(
      "predictor", torch::nn::LSTM(torch::nn::LSTMOptions(hidden, hidden).batch_first(true)));
  encoder_projection = register_module("encoder_projection", torch::nn::Linear(hidden, joint_dim));
  predictor_projection =
      register_module("predictor_projection", torch::nn::Linear(hidden, joint_dim));
  joint = register_module("joint", JointNetwork(joint_dim, vocab));
}

at::Tensor ToyTransducerImpl::encode(const at::Tensor& inputs) {
  return encoder_projection(std::get<0>(encoder(input_embedding(inputs))));
}

at::Tensor ToyTransducerImpl::predict(const at::Tensor& targets) {
  const at::Tensor start = torch::zeros({targets.size(0), 1}, torch::kLong);  // blank
  return predictor_projection(
      std::get<0>(predictor(label_embedding(torch::cat({start, targets}, 1)))));
}

at::Tensor ToyTransducerImpl::loss(const ToyTransducerBatch& batch, bool sample_wise) {
  const at::Tensor enc = encode(batch.inputs);
  const at::Tensor pred = predict(batch.targets);
  if (sample_wise) {
    return sample_wise_transducer_loss(joint, enc, pred, batch.targets, batch.input_lengths,
                                       batch.target_lengths);
  }
  return transducer_loss_batched(joint(enc, pred), batch.targets, batch.input_lengths,
                                 batch.target_lengths);
}

std::vector<int64_t> ToyTransducerImpl::greedy_decode(const at::Tensor& inputs, int64_t length) {
  torch::NoGradGuard no_grad;
  const at::Tensor enc = encode(inputs.narrow(0, 0, length).unsqueeze(0))[0];  // [T, J]
  std::vector<int64_t> hyp;
  for (int64_t t = 0; t < length; ++t) {
    for (int emitted = 0; emitted < 3; ++emitted) {
      const at::Tensor prefix = torch::tensor(hyp, torch::kLong).view({1, int64_t(hyp.size())});
      const at::Tensor pred = predict(prefix)[0][int64_t(hyp.size())];  // [J]
      const int64_t best = joint->output(torch::tanh(enc[t] + pred)).argmax().item<int64_t>();
      if (best == 0) break;
      hyp.push_back(best);
    }
  }
  return hyp;
}

}  // namespace pipetrain::loss
