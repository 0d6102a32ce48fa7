// Single-process training throughput (tokens/s) and model FLOP utilisation (MFU) against the
// machine's measured GEMM peak per core. Prints a markdown table.
//   ./build/bench/train_throughput [--steps N]
#include <chrono>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/machine.h"
#include "data/text_dataset.h"
#include "train/trainer.h"

using namespace pipetrain;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Best-of-N FP32 GEMM rate on `threads` threads, 512x512x512 (the scale of our layers).
double gemm_peak_flops(int threads) {
  torch::set_num_threads(threads);
  const int64_t n = 512;
  auto a = torch::randn({n, n}), b = torch::randn({n, n}), c = torch::empty({n, n});
  double best = 0;
  for (int rep = 0; rep < 30; ++rep) {
    const auto start = Clock::now();
    for (int i = 0; i < 4; ++i) torch::mm_out(c, a, b);
    best = std::max(best, 4 * 2.0 * n * n * n / seconds(start));
  }
  return best;
}

// Training FLOPs per token: 6 per matmul parameter (forward + backward) plus attention's
// score and mix products, 12 * layers * seq_len * d_model (PaLM's accounting, no causal discount).
double flops_per_token(const ModelConfig& m) {
  const double d = double(m.d_model), blocks = double(m.layers);
  const double block_matmul_params = 12 * d * d;  // qkv 3d^2, out d^2, mlp 8d^2
  const double head_params = double(m.vocab_size) * d;
  return 6 * (blocks * block_matmul_params + head_params) + 12 * blocks * double(m.seq_len) * d;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_in_process();
  int64_t steps = 20;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--steps") steps = std::atoll(argv[i + 1]);
  }
  const double peak1 = gemm_peak_flops(1);
  fmt::print("single-core FP32 GEMM peak (512^3, best of 30): {:.1f} GFLOP/s\n\n", peak1 / 1e9);
  fmt::print("| model | params | seq | batch | threads | tokens/s | model GFLOP/s | MFU vs threads x 1-core peak |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  struct Size { const char* name; int64_t layers, d_model, heads, seq_len, batch; };
  for (const Size size : {Size{"small (default)", 4, 128, 4, 128, 32}, Size{"medium", 8, 256, 8, 256, 16}}) {
    for (int threads : {1, 2}) {
      Config config;
      config.model.layers = size.layers;
      config.model.d_model = size.d_model;
      config.model.heads = size.heads;
      config.model.seq_len = size.seq_len;
      config.train.batch_size = size.batch;
      config.train.microbatches = 1;  // one GEMM over the whole batch
      config.train.steps = steps + 2;
      torch::set_num_threads(threads);
      const TextDataset data(std::string(PIPETRAIN_DATA_DIR) + "/tinyshakespeare.txt", 0.1, size.seq_len);
      Trainer trainer(config, data);
      trainer.train_step(0);  // warm-up: allocator, OpenMP pool
      trainer.train_step(1);
      const auto start = Clock::now();
      for (int64_t step = 2; step < steps + 2; ++step) trainer.train_step(step);
      const double tokens_per_s = double(steps * size.batch * size.seq_len) / seconds(start);
      const double flops = tokens_per_s * flops_per_token(config.model);
      fmt::print("| {} ({}L, d{}) | {:.2f}M | {} | {} | {} | {:.0f} | {:.1f} | {:.0f}% |\n", size.name,
                 size.layers, size.d_model, double(parameter_count(trainer.model())) / 1e6,
                 size.seq_len, size.batch, threads, tokens_per_s, flops / 1e9,
                 100 * flops / (threads * peak1));
    }
  }
  return 0;
}
