// What zero-bubble's split costs in one process: the backward of a pipeline stage as one pass vs
// as B (input gradient) + W (weight gradients, restarted at the junctions), on the same graph
// built fresh each time, alternating, median of the repetitions. One thread, the default model
// (d_model 128, 4 heads, 128 tokens), microbatch 4 sequences.
//   ./build/bench/split_backward_cost [--repeats 30] [--blocks 3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/gpt.h"
#include "runtime/split_backward.h"

using namespace pipetrain;

namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Times {
  double full = 0, input = 0, weight = 0;
};

// One backward of a middle stage (blocks only) or a last stage (blocks + head, loss).
Times time_once(GptStack& stage, bool last, int64_t rows, const GptConfig& config) {
  auto input = torch::randn({rows, config.seq_len, config.d_model}).requires_grad_(true);
  auto targets = torch::randint(config.vocab_size, {rows, config.seq_len});
  const auto root = [&] {
    auto out = stage.forward(input);
    return last ? torch::nn::functional::cross_entropy(out.reshape({-1, config.vocab_size}),
                                                       targets.reshape({-1}))
                : out;
  };
  Times t;
  auto out = root();
  auto grad = torch::ones_like(out);
  auto start = std::chrono::steady_clock::now();
  torch::autograd::backward({out}, {grad});
  t.full = ms_since(start);
  stage.zero_grad();
  input.mutable_grad() = torch::Tensor();
  out = root();
  start = std::chrono::steady_clock::now();
  runtime::SplitBackward split({out}, {grad}, input, stage.parameters());
  t.input = ms_since(start);
  start = std::chrono::steady_clock::now();
  split.weight_pass();
  t.weight = ms_since(start);
  stage.zero_grad();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 30;
  GptConfig config;
  config.layers = 3;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--repeats") repeats = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--blocks") config.layers = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  const int64_t rows = 4;
  fmt::print("one thread, d_model {}, {} heads, {} tokens, microbatch {} sequences, {} repeats (median)\n\n",
             config.d_model, config.heads, config.seq_len, rows, repeats);
  fmt::print("| stage | full backward ms | B ms | W ms | B + W ms | B + W / full |\n|---|---|---|---|---|---|\n");
  for (const bool last : {false, true}) {
    // A middle stage holds the blocks; a last stage the blocks and the head.
    GptStack stage(config, 1, 1, last ? config.layer_count() : config.layers + 1);  // [first, last)
    std::vector<double> full, input, weight, both;
    for (int r = 0; r < repeats; ++r) {
      const Times t = time_once(stage, last, rows, config);
      full.push_back(t.full), input.push_back(t.input), weight.push_back(t.weight);
      both.push_back(t.input + t.weight);
    }
    fmt::print("| {} ({} blocks{}) | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
               last ? "last" : "middle", config.layers, last ? " + head" : "", median(full),
               median(input), median(weight), median(both), median(both) / median(full));
  }
  return 0;
}
