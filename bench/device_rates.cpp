// What a cluster description says about a device, measured instead of assumed:
// 1. How its matrix products slow down with few rows (`half_efficiency_tokens`,
//    plan::ClusterSpec::sustained_flops): the twelve products of one GPT block of width D over n
//    tokens (each linear's forward X W^T, input gradient dY W and weight gradient dY^T X; linears
//    D->3D, D->D, D->4D, 4D->D) for n from 16 up, fitted to rate(n) = R n / (n + h) (least
//    squares in log rate). On a GPU eagerly and replayed from a CUDA graph (train.cuda_graphs).
// 2. An operator's fixed cost (`operator_us`, `launch_us`): a chain of element-wise operators
//    over one value, forward and backward with autograd as training runs them, per operator the
//    host calls (counted_work's); on a GPU that is the host's time to issue one (the device
//    waits), and a graph's replay of such kernels is the device's own time per kernel.
//
//   device_rates [--device cpu|cuda] [--dtype float32|bfloat16] [--width D] [--max-tokens N]
//             [--threads T] [--rounds R]
#include <torch/torch.h>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "device/graph_capture.h"
#include "device/placement.h"
#include "model/op_work.h"

namespace {

struct Linear {
  at::Tensor x, w, dy, y, dx, dw;  // [n, in], [out, in], [n, out] and the three products' outputs
};

// One block's linears over n tokens, with preallocated outputs (a graph replays into them).
std::vector<Linear> block_linears(int64_t n, int64_t width, const at::TensorOptions& options) {
  const int64_t d = width;
  std::vector<Linear> linears;
  for (const auto& [in, out] : std::vector<std::pair<int64_t, int64_t>>{{d, 3 * d}, {d, d}, {d, 4 * d}, {4 * d, d}}) {
    Linear l{torch::randn({n, in}, options), torch::randn({out, in}, options) * 0.02,
             torch::randn({n, out}, options), torch::empty({n, out}, options),
             torch::empty({n, in}, options), torch::empty({out, in}, options)};
    linears.push_back(std::move(l));
  }
  return linears;
}

void products(std::vector<Linear>& linears) {
  for (Linear& l : linears) {
    at::mm_out(l.y, l.x, l.w.t());
    at::mm_out(l.dx, l.dy, l.w);
    at::mm_out(l.dw, l.dy.t(), l.x);
  }
}

double block_flops(int64_t n, int64_t width) {
  const double d = double(width);
  return 3 * 2 * double(n) * (3 * d * d + d * d + 4 * d * d + 4 * d * d);
}

// The median seconds of `rounds` timings of `work` run `repeats` times between two waits.
double median_seconds(const std::function<void()>& work, const c10::Device& device, int rounds,
                      int repeats) {
  std::vector<double> seconds;
  work();  // warm-up: kernels chosen, memory allocated
  for (int r = 0; r < rounds; ++r) {
    pipetrain::device::synchronize(device);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats; ++i) work();
    pipetrain::device::synchronize(device);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeats);
  }
  std::sort(seconds.begin(), seconds.end());
  return seconds[seconds.size() / 2];
}

// h minimising the squared log-distance between R n / (n + h) and the measured rates, with R
// the best measured rate (a grid over h, each step 2% larger).
double fitted_half_tokens(const std::vector<int64_t>& tokens, const std::vector<double>& rates) {
  const double best = *std::max_element(rates.begin(), rates.end());
  double best_h = 0, best_error = 1e300;
  for (double h = 0.5; h < 1e6; h *= 1.02) {
    double error = 0;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const double n = double(tokens[i]);
      error += std::pow(std::log(best * n / (n + h)) - std::log(rates[i]), 2);
    }
    if (error < best_error) best_error = error, best_h = h;
  }
  return best_h;
}

constexpr int kChain = 64;

// kChain element-wise operators over one value and their backward, as a training step runs them.
void operator_chain(const at::TensorOptions& options) {
  at::Tensor x = torch::ones({1}, options).requires_grad_(true), y = x;
  for (int i = 0; i < kChain; ++i) y = y * 1.0001;
  y.backward();
}

// The seconds an operator takes where it runs (a CPU) or to issue (a GPU, eagerly): the chain's
// time over the operators it calls, counted on the host.
double eager_operator_seconds(const at::TensorOptions& options, int rounds) {
  const double operators = pipetrain::counted_work([] { operator_chain(torch::TensorOptions()); }).operators;
  return median_seconds([&] { operator_chain(options); }, options.device(), rounds, 8) / operators;
}

// `work` captured into a CUDA graph (after one eager run: cuBLAS's workspace and kernels chosen
// outside the capture) on a side stream once the device is idle (its inputs written), and the
// median seconds of its replays.
double replay_seconds(const std::function<void()>& work, const c10::Device& device, int rounds,
                      int repeats) {
  at::cuda::CUDAGraph graph;
  {
    const c10::cuda::CUDAStreamGuard guard(pipetrain::device::idle_capture_stream(device));
    work();
    graph.capture_begin();
    work();
    graph.capture_end();
  }
  return median_seconds([&] { graph.replay(); }, device, rounds, repeats);
}

// A kernel's own time on a GPU: kChain in-place element-wise kernels replayed from a graph.
double graphed_kernel_seconds(const at::TensorOptions& options, int rounds) {
  at::Tensor z = torch::ones({1}, options);
  const auto chain = [&] {
    for (int i = 0; i < kChain; ++i) z.mul_(1.0001);
  };
  return replay_seconds(chain, options.device(), rounds, 8) / kChain;
}

struct Args {
  std::string device = "cpu", dtype = "float32";
  int64_t width = 768, max_tokens = 0, threads = 1, rounds = 7;
  bool gpu() const { return device == "cuda"; }
};

std::optional<Args> parse_args(int argc, char** argv) {
  Args args;
  const std::map<std::string, std::string*> words{{"--device", &args.device}, {"--dtype", &args.dtype}};
  const std::map<std::string, int64_t*> numbers{{"--width", &args.width}, {"--max-tokens", &args.max_tokens},
                                                {"--threads", &args.threads}, {"--rounds", &args.rounds}};
  if (argc % 2 == 0) return std::nullopt;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (const auto word = words.find(argv[i]); word != words.end()) {
      *word->second = argv[i + 1];
    } else if (const auto number = numbers.find(argv[i]); number != numbers.end()) {
      *number->second = std::atol(argv[i + 1]);
    } else {
      return std::nullopt;
    }
  }
  const bool known = (args.dtype == "float32" || args.dtype == "bfloat16") &&
                     (args.device == "cpu" || args.device == "cuda");
  if (!known || args.width < 1 || args.threads < 1 || args.rounds < 1) return std::nullopt;
  if (args.max_tokens == 0) args.max_tokens = args.gpu() ? 32768 : 2048;
  return args;
}

// The block's products at 16, 32, ... tokens: rates eagerly and (on a GPU) replayed.
struct ProductRates {
  std::vector<int64_t> tokens;
  std::vector<double> eager, graphed;
};

ProductRates measure_products(const Args& args, const at::TensorOptions& options) {
  ProductRates rates;
  for (int64_t n = 16; n <= args.max_tokens; n *= 2) {
    std::vector<Linear> linears = block_linears(n, args.width, options);
    const double flops = block_flops(n, args.width);
    const int repeats = int(std::clamp<int64_t>(args.max_tokens / n, 1, 64));
    const auto work = [&] { products(linears); };
    rates.tokens.push_back(n);
    rates.eager.push_back(flops / median_seconds(work, options.device(), int(args.rounds), repeats));
    if (args.gpu()) rates.graphed.push_back(flops / replay_seconds(work, options.device(), int(args.rounds), repeats));
  }
  return rates;
}

void print_products(const Args& args, const ProductRates& rates) {
  const bool graphed = !rates.graphed.empty();
  std::printf("| tokens | ms | GFLOP/s | share of best |%s\n", graphed ? " graphed ms | graphed GFLOP/s | graphed share |" : "");
  std::printf("|---|---|---|---|%s\n", graphed ? "---|---|---|" : "");
  const auto best = [](const std::vector<double>& r) { return *std::max_element(r.begin(), r.end()); };
  for (size_t i = 0; i < rates.tokens.size(); ++i) {
    const double flops = block_flops(rates.tokens[i], args.width);
    std::printf("| %lld | %.3f | %.1f | %.2f |", static_cast<long long>(rates.tokens[i]),
                1e3 * flops / rates.eager[i], rates.eager[i] / 1e9, rates.eager[i] / best(rates.eager));
    if (graphed) {
      std::printf(" %.3f | %.1f | %.2f |", 1e3 * flops / rates.graphed[i], rates.graphed[i] / 1e9,
                  rates.graphed[i] / best(rates.graphed));
    }
    std::printf("\n");
  }
  std::printf("\nbest %.1f GFLOP/s; fitted half_efficiency_tokens %.0f", best(rates.eager) / 1e9,
              fitted_half_tokens(rates.tokens, rates.eager));
  if (graphed) {
    std::printf("; graphed: best %.1f GFLOP/s, half_efficiency_tokens %.0f", best(rates.graphed) / 1e9,
                fitted_half_tokens(rates.tokens, rates.graphed));
  }
  std::printf("\n\n");
}

void print_operator_costs(const Args& args, const at::TensorOptions& options) {
  const double operator_s = eager_operator_seconds(options, int(args.rounds));
  if (args.gpu()) {
    std::printf("an operator's fixed cost: launch_us %.2f (the host's, eagerly, with autograd), "
                "operator_us %.2f (a kernel replayed from a graph)\n",
                1e6 * operator_s, 1e6 * graphed_kernel_seconds(options, int(args.rounds)));
  } else {
    std::printf("an operator's fixed cost: operator_us %.2f (with autograd; launch_us 0: nothing "
                "runs asynchronously)\n", 1e6 * operator_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::optional<Args> args = parse_args(argc, argv);
  if (!args) {
    std::fprintf(stderr,
                 "usage: %s [--device cpu|cuda] [--dtype float32|bfloat16] [--width D] "
                 "[--max-tokens N] [--threads T] [--rounds R]\n",
                 argv[0]);
    return 2;
  }
  if (args->gpu() && !torch::cuda::is_available()) {
    std::fprintf(stderr, "device_rates: --device cuda, but this machine has no usable GPU\n");
    return 2;
  }
  torch::set_num_threads(int(args->threads));
  const auto options = torch::TensorOptions().device(c10::Device(args->device)).dtype(
      args->dtype == "bfloat16" ? torch::kBFloat16 : torch::kFloat);
  std::printf("one GPT block's 12 products, width %lld, %s on %s (%lld thread%s)\n\n",
              static_cast<long long>(args->width), args->dtype.c_str(), args->device.c_str(),
              static_cast<long long>(args->threads), args->threads == 1 ? "" : "s");
  print_products(*args, measure_products(*args, options));
  print_operator_costs(*args, options);
  return 0;
}
