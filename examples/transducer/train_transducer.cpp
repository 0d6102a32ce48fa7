// Trains a tiny LSTM transducer with the sample-wise transducer loss on generated data
// (labels held for 1-3 frames, with silences; see src/loss/toy_transducer.h) and shows the
// loss going down and greedy decoding becoming exact.
//
//   train_transducer [--steps N] [--batched]
#include <torch/torch.h>

#include <cstdio>
#include <cstring>

#include "loss/toy_transducer.h"

using namespace pipetrain::loss;

namespace {

double exact_match(ToyTransducer& model, const ToyTransducerBatch& batch) {
  int64_t correct = 0;
  for (int64_t b = 0; b < batch.inputs.size(0); ++b) {
    const auto hyp = model->greedy_decode(batch.inputs[b], batch.input_lengths[b].item<int64_t>());
    const int64_t U = batch.target_lengths[b].item<int64_t>();
    bool same = int64_t(hyp.size()) == U;
    for (int64_t u = 0; same && u < U; ++u) same = hyp[u] == batch.targets[b][u].item<int64_t>();
    correct += same;
  }
  return double(correct) / double(batch.inputs.size(0));
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 300;
  bool sample_wise = true;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atol(argv[++i]);
    else if (!std::strcmp(argv[i], "--batched")) sample_wise = false;
    else {
      std::fprintf(stderr, "usage: %s [--steps N] [--batched]\n", argv[0]);
      return 2;
    }
  }
  const int64_t labels = 8, max_labels = 6, batch_size = 32;
  torch::manual_seed(0);
  ToyTransducer model(labels, 64, 64);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(3e-3));
  const ToyTransducerBatch held_out = make_toy_transducer_batch(64, labels, max_labels, 1u << 30);
  std::printf("%s transducer loss, %ld labels + blank, up to %ld labels per sample\n",
              sample_wise ? "sample-wise" : "batched", labels, max_labels);
  std::printf("step %4d  held-out loss %.4f  exact %.2f\n", 0,
              model->loss(held_out, sample_wise).item<double>(), exact_match(model, held_out));
  for (int64_t step = 1; step <= steps; ++step) {
    const ToyTransducerBatch batch =
        make_toy_transducer_batch(batch_size, labels, max_labels, uint64_t(step));
    optimizer.zero_grad();
    const at::Tensor loss = model->loss(batch, sample_wise);
    loss.backward();
    optimizer.step();
    if (step % 50 == 0 || step == steps) {
      std::printf("step %4ld  train loss %.4f  held-out loss %.4f  exact %.2f\n", step,
                  loss.item<double>(), model->loss(held_out, sample_wise).item<double>(),
                  exact_match(model, held_out));
      std::fflush(stdout);
    }
  }
  return 0;
}
