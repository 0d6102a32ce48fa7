// The LM head's loss over materialised logits: ATen's cross_entropy of the logits widened to
// float32 (pipetrain's loss before 2026-11-27, and the eager script's) against the fused
// loss::softmax_cross_entropy, forward + backward, on one device. GPT-2's head under mixed
// precision: bfloat16 logits of a vocabulary padded to 64 (aligned_head_rows) and viewed back.
//
//   head_loss [--device cpu|cuda] [--dtype bfloat16|float32|float64] [--tokens N]... [--vocab V]
//             [--rounds R] [--check BOUND]
//
// Prints, per token count and method: the median time of R rounds, the two methods taking turns
// (each run waits for the device); the peak bytes above the logits (the CUDA allocator's on a
// GPU, runtime/memory_accounting's counting allocator's on the CPU); the fused loss's distance
// from ATen's (loss, relative; gradient, as a share of the largest gradient). With --check it
// exits 1 when either distance exceeds BOUND (bench/gpu_check.sh's verdict).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "device/placement.h"
#include "device/precision.h"
#include "loss/softmax_cross_entropy.h"
#include "model/gpt.h"
#include "runtime/memory_accounting.h"

namespace {

struct Timing {
  std::vector<double> ms;
  double peak_mb = 0;
  at::Tensor loss, grad;
  double median_ms() {
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
};

// One forward + backward of a method on a fresh copy of the logits; `keep` records its time.
void run_once(bool fused, const at::Tensor& padded0, int64_t vocab, const at::Tensor& targets,
              bool keep, Timing& timing) {
  const c10::Device device = padded0.device();
  const at::Tensor padded = padded0.detach().clone().requires_grad_();
  const at::Tensor logits = padded.narrow(1, 0, vocab);
  pipetrain::device::synchronize(device);
  pipetrain::device::reset_peak_memory(device);
  const auto before = pipetrain::device::device_memory(device);
  auto& host = pipetrain::runtime::CountingAllocator::install();
  host.reset_peak();
  const int64_t host_before = host.live_bytes();
  const auto start = std::chrono::steady_clock::now();
  const at::Tensor loss = fused ? pipetrain::loss::softmax_cross_entropy(logits, targets)
                                : torch::nn::functional::cross_entropy(
                                      pipetrain::device::at_least_float32(logits), targets);
  loss.backward();
  pipetrain::device::synchronize(device);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (keep) timing.ms.push_back(std::chrono::duration<double, std::milli>(elapsed).count());
  const auto after = pipetrain::device::device_memory(device);
  timing.peak_mb =
      double(after ? after->peak - before->allocated : host.peak_bytes() - host_before) / 1e6;
  timing.loss = loss.detach();
  timing.grad = padded.grad();
}

std::string gap(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2e", value);
  return text;
}

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--device cpu|cuda] [--dtype bfloat16|float32|float64] [--tokens N]... "
               "[--vocab V] [--rounds R] [--check BOUND]\n",
               program);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_name = "cpu", dtype_name = "bfloat16";
  std::vector<int64_t> token_counts;
  int64_t vocab = 50257, rounds = 5;
  double bound = -1;  // --check: none
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--device") device_name = value;
    else if (flag == "--dtype") dtype_name = value;
    else if (flag == "--tokens") token_counts.push_back(std::atol(value.c_str()));
    else if (flag == "--vocab") vocab = std::atol(value.c_str());
    else if (flag == "--rounds") rounds = std::atol(value.c_str());
    else if (flag == "--check") bound = std::atof(value.c_str());
    else return usage(argv[0]);
  }
  if (argc % 2 == 0) return usage(argv[0]);
  const at::ScalarType dtype = dtype_name == "bfloat16" ? at::kBFloat16
                               : dtype_name == "float32" ? at::kFloat
                               : dtype_name == "float64" ? at::kDouble
                                                         : at::kByte;
  if (dtype == at::kByte || vocab < 1 || rounds < 1) return usage(argv[0]);
  if (device_name != "cpu" && device_name != "cuda") return usage(argv[0]);
  if (device_name == "cuda" && !torch::cuda::is_available()) {
    std::fprintf(stderr, "head_loss: --device cuda, but this machine has no usable GPU\n");
    return 2;
  }
  if (token_counts.empty()) token_counts = {2048, 4096, 16384};
  const c10::Device device(device_name);
  // Padded as the mixed-precision head pads; other dtypes are unpadded.
  const int64_t columns = dtype == at::kBFloat16 ? pipetrain::aligned_head_rows(vocab) : vocab;
  std::printf(
      "| tokens | V | dtype | method | ms (median of %lld) | peak over logits (MB) | loss | "
      "loss / ATen's - 1 | max |grad - ATen's| / max |grad| |\n",
      static_cast<long long>(rounds));
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  bool within = true;
  for (const int64_t tokens : token_counts) {
    torch::manual_seed(0);
    // Drawn on the device (a host draw of 16384 x 50304 takes seconds): each device its own values.
    const auto on_device = torch::TensorOptions().device(device);
    const at::Tensor padded = (torch::randn({tokens, columns}, on_device) * 2).to(dtype);
    const at::Tensor targets = torch::randint(0, vocab, {tokens}, on_device.dtype(torch::kLong));
    Timing aten, fused;
    for (int64_t r = 0; r <= rounds; ++r) {  // round-robin; round 0 warms up (kernels, allocator)
      run_once(false, padded, vocab, targets, r > 0, aten);
      run_once(true, padded, vocab, targets, r > 0, fused);
    }
    const double scale = aten.grad.abs().max().item<double>();
    const double loss_gap = std::abs(fused.loss.item<double>() / aten.loss.item<double>() - 1);
    const double grad_gap =
        (fused.grad.to(at::kDouble) - aten.grad.to(at::kDouble)).abs().max().item<double>() / scale;
    within = within && loss_gap <= bound && grad_gap <= bound;
    for (auto* row : {&aten, &fused}) {
      const bool is_fused = row == &fused;
      std::printf("| %lld | %lld | %s | %s | %.3f | %.1f | %.6f | %s | %s |\n",
                  static_cast<long long>(tokens), static_cast<long long>(vocab), dtype_name.c_str(),
                  is_fused ? "fused softmax_cross_entropy" : "ATen cross_entropy (float32 copy)",
                  row->median_ms(), row->peak_mb, row->loss.item<double>(),
                  is_fused ? gap(loss_gap).c_str() : "", is_fused ? gap(grad_gap).c_str() : "");
    }
  }
  return bound < 0 || within ? 0 : 1;
}
