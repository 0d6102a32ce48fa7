// The global gradient norm on the CPU: the float64 foreach norm the runtime used (each float32
// gradient read through a float64 copy of itself) against device::squared_sum (float32 norms of
// 4096-value rows, their squares summed in float64), over GPT-2 small's 148 gradient shapes
// (124M values, random normal), one thread. Round-robin rounds, median times; the error of each
// against a float64 reference summed tensor by tensor; the temporaries' peak by the counting
// allocator.
//
//   grad_norm [--rounds N] [--threads T]
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "device/reductions.h"
#include "runtime/memory_accounting.h"

namespace {

using namespace pipetrain;

// GPT-2 small's parameters (tied head: the embedding's gradient once).
std::vector<torch::Tensor> gpt2_small_gradients() {
  const int64_t d = 768, f = 3072, vocab = 50257, positions = 1024;
  std::vector<std::vector<int64_t>> shapes{{vocab, d}, {positions, d}};
  for (int block = 0; block < 12; ++block) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{
             {d}, {d}, {3 * d, d}, {3 * d}, {d, d}, {d}, {d}, {d}, {f, d}, {f}, {d, f}, {d}}) {
      shapes.push_back(shape);
    }
  }
  shapes.push_back({d}), shapes.push_back({d});  // the final norm
  torch::manual_seed(3);
  std::vector<torch::Tensor> grads;
  for (const auto& shape : shapes) grads.push_back(torch::randn(shape) * 1e-3);
  return grads;
}

double float64_foreach(const std::vector<torch::Tensor>& grads) {
  return torch::stack(at::_foreach_norm(grads, 2, torch::kFloat64)).pow(2).sum().item<double>();
}

double rows_in_float32(const std::vector<torch::Tensor>& grads) {
  return device::squared_sum(grads).item<double>();
}

double reference(const std::vector<torch::Tensor>& grads) {
  double sum = 0;
  for (const auto& g : grads) sum += g.to(torch::kFloat64).square().sum().item<double>();
  return sum;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 7, threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::stoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--threads") == 0) threads = std::stoi(argv[i + 1]);
    else return std::fprintf(stderr, "usage: grad_norm [--rounds N] [--threads T]\n"), 2;
  }
  at::set_num_threads(threads);
  runtime::CountingAllocator& allocator = runtime::CountingAllocator::install();
  const auto grads = gpt2_small_gradients();
  int64_t values = 0;
  for (const auto& g : grads) values += g.numel();
  const double exact = reference(grads);
  struct Way {
    const char* name;
    std::function<double(const std::vector<torch::Tensor>&)> run;
    std::vector<double> ms;
    double error = 0, peak_mb = 0;
  };
  std::vector<Way> ways{{"float64 foreach (copy of each gradient)", float64_foreach, {}},
                        {"float32 rows, float64 sum (squared_sum)", rows_in_float32, {}}};
  for (int round = 0; round < rounds; ++round) {
    for (Way& way : ways) {
      allocator.reset_peak();
      const int64_t before = allocator.live_bytes();
      const auto start = std::chrono::steady_clock::now();
      const double got = way.run(grads);
      way.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
      way.error = std::abs(got - exact) / exact;
      way.peak_mb = double(allocator.peak_bytes() - before) / (1 << 20);
    }
  }
  fmt::print("GPT-2 small's gradients: {} tensors, {:.1f}M values; {} thread(s), {} rounds\n\n",
             grads.size(), double(values) / 1e6, threads, rounds);
  fmt::print("| squared global norm | median ms | relative error | temporaries |\n|---|---|---|---|\n");
  for (const Way& way : ways) {
    fmt::print("| {} | {:.1f} | {:.1e} | {:.2f} MiB |\n", way.name, median(way.ms), way.error, way.peak_mb);
  }
  return 0;
}
