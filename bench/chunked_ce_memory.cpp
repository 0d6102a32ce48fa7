// Peak memory and time of the LM-head cross-entropy: plain (full [N, V] logits) vs chunked.
//
//   chunked_ce_memory [--tokens N ...] [--dim D] [--vocab V] [--chunk C]
//
// Each run (forward + backward into hidden and the tied weight) is a fresh child process.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "loss/chunked_cross_entropy.h"
#include "peak_memory_child.h"

namespace {

std::string run(int64_t tokens, int64_t dim, int64_t vocab, int64_t chunk, bool inputs_only) {
  torch::manual_seed(0);
  const at::Tensor hidden = torch::randn({tokens, dim}).requires_grad_();
  const at::Tensor weight = (torch::randn({vocab, dim}) * 0.02).requires_grad_();
  const at::Tensor targets = torch::randint(0, vocab, {tokens}, torch::kLong);
  if (inputs_only) return "0 0";
  const auto start = std::chrono::steady_clock::now();
  at::Tensor loss;
  if (chunk > 0) {
    loss = pipetrain::loss::chunked_cross_entropy(hidden, weight, targets, {chunk});
  } else {
    loss = torch::nn::functional::cross_entropy(hidden.mm(weight.t()), targets);
  }
  loss.backward();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::to_string(seconds) + " " + std::to_string(loss.item<double>());
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> token_counts;
  int64_t dim = 768, vocab = 50257, chunk = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int64_t value = std::atol(argv[i + 1]);
    if (!std::strcmp(argv[i], "--tokens")) token_counts.push_back(value);
    else if (!std::strcmp(argv[i], "--dim")) dim = value;
    else if (!std::strcmp(argv[i], "--vocab")) vocab = value;
    else if (!std::strcmp(argv[i], "--chunk")) chunk = value;
    else {
      std::fprintf(stderr, "usage: %s [--tokens N]... [--dim D] [--vocab V] [--chunk C]\n", argv[0]);
      return 2;
    }
  }
  if (token_counts.empty()) token_counts = {4096, 8192};
  if (dim < 1 || vocab < 1 || chunk < 1) {
    std::fprintf(stderr, "error: sizes must be positive\n");
    return 2;
  }
  std::printf("| tokens | D | V | method | peak RSS (MB) | over inputs (MB) | time (s) | loss |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (int64_t tokens : token_counts) {
    const auto base = pipetrain::bench::run_in_child([&] { return run(tokens, dim, vocab, 0, true); });
    for (int64_t c : {int64_t{0}, chunk}) {
      const auto r = pipetrain::bench::run_in_child([&] { return run(tokens, dim, vocab, c, false); });
      double seconds = 0, loss = 0;
      std::sscanf(r.report.c_str(), "%lf %lf", &seconds, &loss);
      const std::string method = c == 0 ? "plain" : "chunked " + std::to_string(c);
      if (!r.ok) {
        std::printf("| %ld | %ld | %ld | %s | failed | | | |\n", tokens, dim, vocab, method.c_str());
        continue;
      }
      std::printf("| %ld | %ld | %ld | %s | %.0f | %.0f | %.2f | %.4f |\n", tokens, dim, vocab,
                  method.c_str(), r.peak_rss_mb, r.peak_rss_mb - base.peak_rss_mb, seconds, loss);
      std::fflush(stdout);
    }
  }
  return 0;
}
