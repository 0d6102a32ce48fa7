// What zero-bubble's split costs in one process: the backward of a pipeline stage as one pass vs
// as B (input gradient) + W (weight gradients, restarted at the junctions), on the same graph
// built fresh each time, alternating, median of the repetitions; beside the ratios the planner's
// cost model gives (runtime::model_plan_costs: each of a layer's two backward products costs a
// forward, and chunked cross-entropy recomputes its logits in the backward, in B and again in W).
// One thread, d_model 128, 4 heads, 128 tokens, vocabulary 8192, microbatch 4 sequences.
//   ./build/bench/split_backward_cost [--repeats 30] [--blocks 3] [--vocab 8192] [--chunk 128]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/gpt.h"
#include "model/gpt_model.h"
#include "plan/partition.h"
#include "runtime/model_costs.h"
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

// One backward of a middle stage (blocks only) or a last stage (blocks + head, its own loss).
Times time_once(GptStack& stage, int64_t rows, const GptConfig& config) {
  auto input = torch::randn({rows, config.seq_len, config.d_model}).requires_grad_(true);
  auto targets = torch::randint(config.vocab_size, {rows, config.seq_len});
  const auto root = [&] {
    auto out = stage.forward(input);
    return stage.has_head() ? stage.loss(out, targets) : out;
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

// The cost model's whole backward, B and W of layers [first, last).
Times modelled(const GptConfig& config, int64_t rows, int64_t first, int64_t last) {
  const auto layers =
      runtime::model_plan_costs(GptModel(config, 1), rows, runtime::ModelCostOptions{});
  Times t;
  for (int64_t i = first; i < last; ++i) {
    t.full += layers[size_t(i)].backward_s;
    t.input += plan::input_gradient_s(layers[size_t(i)]);
    t.weight += plan::weight_gradient_s(layers[size_t(i)]);
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 30;
  int64_t chunk = 128;
  GptConfig config;
  config.layers = 3;
  config.vocab_size = 8192;
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--repeats") repeats = std::atoi(argv[i + 1]);
    if (flag == "--blocks") config.layers = std::atoi(argv[i + 1]);
    if (flag == "--vocab") config.vocab_size = std::atoi(argv[i + 1]);
    if (flag == "--chunk") chunk = std::atoi(argv[i + 1]);
  }
  torch::set_num_threads(1);
  const int64_t rows = 4;
  fmt::print("one thread, d_model {}, {} heads, {} tokens, vocabulary {}, microbatch {} "
             "sequences, {} repeats (median); modelled: runtime::model_plan_costs\n\n",
             config.d_model, config.heads, config.seq_len, config.vocab_size, rows, repeats);
  fmt::print("| stage | full backward ms | B ms | W ms | B + W / full | modelled | W / (B + W) | "
             "modelled |\n|---|---|---|---|---|---|---|---|\n");
  for (const int64_t loss_chunk : {int64_t(-1), int64_t(0), chunk}) {
    // A middle stage holds the blocks (-1); a last stage the blocks and the head, with full
    // logits (0) or chunked cross-entropy.
    const bool last = loss_chunk >= 0;
    GptConfig stage_config = config;
    stage_config.loss_chunk_tokens = std::max<int64_t>(0, loss_chunk);
    const int64_t first = 1, end = last ? config.layer_count() : config.layers + 1;
    GptStack stage(stage_config, 1, first, end);
    std::vector<double> full, input, weight, both;
    for (int r = 0; r < repeats; ++r) {
      const Times t = time_once(stage, rows, stage_config);
      full.push_back(t.full), input.push_back(t.input), weight.push_back(t.weight);
      both.push_back(t.input + t.weight);
    }
    const Times model = modelled(stage_config, rows, first, end);
    const std::string name = !last            ? "middle"
                             : loss_chunk == 0 ? "last, full logits"
                                               : fmt::format("last, chunked CE ({} tokens)", loss_chunk);
    fmt::print("| {} ({} blocks{}) | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
               name, config.layers, last ? " + head" : "", median(full), median(input),
               median(weight), median(both) / median(full),
               (model.input + model.weight) / model.full, median(weight) / median(both),
               model.weight / (model.input + model.weight));
  }
  return 0;
}
