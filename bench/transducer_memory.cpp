// Transducer loss memory and time: batched reference vs the sample-wise method.
//
//   transducer_memory                  sweep over B and T, one child process per run (table)
//   transducer_memory --headline [--batch B] [--frames T] [--labels U] [--vocab V] [--joint J]
//                     [--budget-mb M]  the paper's headline: B=1024, T=1000, U=100, V=256, J=256
//                     [--device cuda] [--dtype bfloat16]  on a GPU (peak: the CUDA allocator's),
//                     the joint in bfloat16 (autocast; loss and gradients accumulate in float32),
//                     or everything in float64 (the reference a float32 run's gradients are off by)
//                     [--profile PREFIX]  the run under the profiler: every operator and, on a
//                     GPU, every kernel (PREFIX.trace.json, and the table, PREFIX.txt and stdout)
//
// Every run computes the loss and all gradients (encoder output, predictor output, joint).
#include <malloc.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "device/placement.h"
#include "device/precision.h"
#include "device/step_profiler.h"
#include "loss/joint_network.h"
#include "peak_memory_child.h"
#include "runtime/memory_accounting.h"

using namespace pipetrain::loss;

namespace {

struct Config {
  int64_t batch = 8, frames = 100, labels = 50, vocab = 256, joint = 256;
  bool ragged = true;  // lengths uniform in [max/2, max]
};

struct Inputs {
  at::Tensor enc, pred, targets, t_len, u_len;
};

Inputs make_inputs(const Config& c) {
  torch::manual_seed(0);
  Inputs in;
  in.enc = (torch::randn({c.batch, c.frames, c.joint}) * 0.5).requires_grad_();
  in.pred = (torch::randn({c.batch, c.labels + 1, c.joint}) * 0.5).requires_grad_();
  in.targets = torch::randint(1, c.vocab, {c.batch, c.labels}, torch::kLong);
  if (c.ragged) {
    in.t_len = torch::randint(c.frames / 2, c.frames + 1, {c.batch}, torch::kLong);
    in.u_len = torch::randint(c.labels / 2, c.labels + 1, {c.batch}, torch::kLong);
    in.t_len[0] = c.frames;
    in.u_len[0] = c.labels;
  } else {
    in.t_len = torch::full({c.batch}, c.frames, torch::kLong);
    in.u_len = torch::full({c.batch}, c.labels, torch::kLong);
  }
  return in;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// method: "inputs" (allocate inputs only: the baseline), "batched", "sample-wise",
// "sample-wise-256MB" (groups of samples within a 256 MB joint budget).
std::string run_method(const Config& c, const std::string& method) {
  Inputs in = make_inputs(c);
  torch::manual_seed(1);
  JointNetwork joint(c.joint, c.vocab);
  if (method == "inputs") return "0 0";
  const auto start = std::chrono::steady_clock::now();
  at::Tensor loss;
  if (method == "batched") {
    loss = transducer_loss_batched(joint(in.enc, in.pred), in.targets, in.t_len, in.u_len);
  } else {
    SampleWiseOptions options;
    if (method == "sample-wise-256MB") options.memory_budget_bytes = int64_t{256} << 20;
    loss = sample_wise_transducer_loss(joint, in.enc, in.pred, in.targets, in.t_len, in.u_len,
                                       options);
  }
  loss.backward();
  return std::to_string(seconds_since(start)) + " " + std::to_string(loss.item<double>());
}

int sweep() {
  std::printf("| B | T | U | V | J | method | peak RSS (MB) | over inputs (MB) | time (s) | loss |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (int64_t batch : {8, 32}) {
    for (int64_t frames : {100, 200, 400}) {
      Config c;
      c.batch = batch;
      c.frames = frames;
      const auto base = pipetrain::bench::run_in_child([&] { return run_method(c, "inputs"); });
      for (const char* method : {"batched", "sample-wise", "sample-wise-256MB"}) {
        const auto r = pipetrain::bench::run_in_child([&] { return run_method(c, method); });
        double seconds = 0, loss = 0;
        std::sscanf(r.report.c_str(), "%lf %lf", &seconds, &loss);
        if (!r.ok) {
          std::printf("| %ld | %ld | %ld | %ld | %ld | %s | failed | | | |\n", batch, frames,
                      c.labels, c.vocab, c.joint, method);
          continue;
        }
        std::printf("| %ld | %ld | %ld | %ld | %ld | %s | %.0f | %.0f | %.2f | %.4f |\n", batch,
                    frames, c.labels, c.vocab, c.joint, method, r.peak_rss_mb,
                    r.peak_rss_mb - base.peak_rss_mb, seconds, loss);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

// A leaf on `device` with the values of `tensor` (made on the host, so every device sees the
// same inputs).
at::Tensor leaf_on(const at::Tensor& tensor, const c10::Device& device) {
  return tensor.detach().to(device).requires_grad_(tensor.requires_grad());
}

int headline(const Config& c, int64_t budget_mb, const c10::Device& device,
             const std::string& dtype, const std::string& profile) {
  const bool bfloat16 = dtype == "bfloat16", float64 = dtype == "float64";
  // On the CPU, the tensors' own high-water mark too: the resident peak also holds what glibc's
  // heap keeps, which moved by up to 0.3 GB between two builds of the same loss code.
  auto& host = pipetrain::runtime::CountingAllocator::install();
  std::printf("sample-wise transducer loss + gradients: B=%ld T=%ld U=%ld V=%ld J=%ld, %s, joint in %s, %d threads\n",
              c.batch, c.frames, c.labels, c.vocab, c.joint, device.str().c_str(),
              dtype.c_str(), at::get_num_threads());
  const double batched_gb = double(c.batch) * c.frames * (c.labels + 1) * (c.vocab + c.joint) * 4 / 1e9;
  std::printf("(a batched joint would hold [B,T,U+1,V+J] = %.0f GB per copy)\n", batched_gb);
  Inputs in = make_inputs(c);
  if (float64) in.enc = in.enc.to(at::kDouble), in.pred = in.pred.to(at::kDouble);  // the reference
  in.enc = leaf_on(in.enc, device), in.pred = leaf_on(in.pred, device);
  in.targets = in.targets.to(device), in.t_len = in.t_len.to(device), in.u_len = in.u_len.to(device);
  torch::manual_seed(1);
  JointNetwork joint(c.joint, c.vocab);
  joint->to(device, float64 ? at::kDouble : at::kFloat);
  const auto precision = pipetrain::device::precision_of(
      bfloat16 ? pipetrain::device::PrecisionKind::BFloat16Mixed : pipetrain::device::PrecisionKind::Float32);
  pipetrain::device::synchronize(device);
  pipetrain::device::reset_peak_memory(device);
  const auto inputs = pipetrain::device::device_memory(device);
  const double inputs_gb = inputs ? double(inputs->allocated) / 1e9 : 0;
  SampleWiseOptions options;
  options.memory_budget_bytes = budget_mb << 20;
  const auto start = std::chrono::steady_clock::now();
  int64_t last_percent = -1;
  options.on_progress = [&](int64_t done, int64_t total) {
    const int64_t percent = done * 100 / total;
    if (percent == last_percent) return;
    last_percent = percent;
    const double elapsed = seconds_since(start);
    std::fprintf(stderr, "\r%ld/%ld samples  %.0f s elapsed  ETA %.0f s   ", done, total, elapsed,
                 elapsed / double(done) * double(total - done));
  };
  pipetrain::device::StepProfiler profiler;
  if (!profile.empty()) profiler.start();
  at::Tensor loss;
  {
    pipetrain::device::ComputeScope scope(precision, device.type());
    loss = sample_wise_transducer_loss(joint, in.enc, in.pred, in.targets, in.t_len, in.u_len, options);
  }
  pipetrain::device::synchronize(device);
  const double forward_s = seconds_since(start);
  loss.backward();
  pipetrain::device::synchronize(device);
  const double total_s = seconds_since(start);
  if (profiler.running()) std::printf("%s\n", profiler.stop_and_write(profile, 1).c_str());
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::fprintf(stderr, "\n");
  // Norms summed in double: a float32 reduction over 500k values is itself off by up to 2.5e-4
  // on the CPU, which would hide the gradients' own accuracy.
  const auto norm = [](const at::Tensor& t) { return t.to(at::kDouble).norm().item<double>(); };
  std::printf("loss %.10g  |d(enc)| %.10g  |d(pred)| %.10g  |d(W)| %.10g\n", loss.item<double>(),
              norm(in.enc.grad()), norm(in.pred.grad()), norm(joint->output->weight.grad()));
  std::printf("time %.1f s (loss + joint gradients %.1f s, hand-off %.1f s), %.2f s/sample\n",
              total_s, forward_s, total_s - forward_s, total_s / double(c.batch));
  std::printf("peak resident memory %.2f GB (ru_maxrss, whole process incl. inputs)\n",
              double(usage.ru_maxrss) / 1024.0 / 1024.0);
  const double tensors_gb = double(host.peak_bytes()) / 1e9;
  if (device.is_cpu()) {
    std::printf("peak of the tensors %.3f GB (counting allocator, inputs included)\n", tensors_gb);
  }
  // The peak a table reports: the GPU's allocator on a GPU, the process's resident set on the CPU.
  double peak_gb = double(usage.ru_maxrss) * 1024 / 1e9;
  if (const auto gpu = pipetrain::device::device_memory(device)) {
    peak_gb = double(gpu->peak) / 1e9;
    std::printf("peak GPU memory %.2f GB (CUDA caching allocator, inputs %.2f GB included)\n",
                peak_gb, inputs_gb);
  }
  std::printf("RESULT {\"mode\": \"pipetrain sample-wise%s\", \"batch\": %ld, \"peak_gb\": %.3f, "
              "\"cpu_tensors_peak_gb\": %.3f, \"seconds\": %.3f, \"ms_per_utterance\": %.3f}\n",
              bfloat16 ? " bf16" : "", c.batch, peak_gb, tensors_gb, total_s,
              1e3 * total_s / double(c.batch));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // glibc serves blocks over 32 MB with mmap and unmaps them on free, so every sample's joint
  // buffers (~100 MB each at T=1000, U=100) would be page-faulted in afresh: on this VM that
  // doubles the time. Keep freed memory in the heap for reuse (peak RSS is unaffected).
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  bool run_headline = false;
  Config c;
  int64_t budget_mb = 0;
  std::string device = "cpu", dtype = "float32", profile;
  for (int i = 1; i < argc; ++i) {  // --headline sets the defaults the other flags change
    if (!std::strcmp(argv[i], "--headline")) c = Config{1024, 1000, 100, 256, 256, false};
  }
  for (int i = 1; i < argc; ++i) {
    auto value = [&] { return i + 1 < argc ? std::atol(argv[++i]) : 0L; };
    if (!std::strcmp(argv[i], "--headline")) {
      run_headline = true;
    } else if (!std::strcmp(argv[i], "--batch")) c.batch = value();
    else if (!std::strcmp(argv[i], "--frames")) c.frames = value();
    else if (!std::strcmp(argv[i], "--labels")) c.labels = value();
    else if (!std::strcmp(argv[i], "--vocab")) c.vocab = value();
    else if (!std::strcmp(argv[i], "--joint")) c.joint = value();
    else if (!std::strcmp(argv[i], "--budget-mb")) budget_mb = value();
    else if (!std::strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
    else if (!std::strcmp(argv[i], "--dtype") && i + 1 < argc) dtype = argv[++i];
    else if (!std::strcmp(argv[i], "--profile") && i + 1 < argc) profile = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--headline [--batch B] [--frames T] [--labels U] "
                           "[--vocab V] [--joint J] [--budget-mb M] [--device cuda] "
                           "[--dtype bfloat16|float64] [--profile PREFIX]]\n", argv[0]);
      return 2;
    }
  }
  if (c.batch < 1 || c.frames < 2 || c.labels < 1 || c.vocab < 2 || c.joint < 1) {
    std::fprintf(stderr, "error: sizes must be positive\n");
    return 2;
  }
  if (device != "cpu" && device != "cuda") {
    std::fprintf(stderr, "error: --device must be cpu or cuda\n");
    return 2;
  }
  if (dtype != "float32" && dtype != "bfloat16" && dtype != "float64") {
    std::fprintf(stderr, "error: --dtype must be float32, bfloat16 or float64\n");
    return 2;
  }
  if (device == "cuda" && pipetrain::device::this_hardware().gpus == 0) {
    std::fprintf(stderr, "error: --device cuda but libtorch sees no GPU\n");
    return 2;
  }
  return run_headline ? headline(c, budget_mb, c10::Device(device == "cuda" ? "cuda:0" : "cpu"),
                                 dtype, profile)
                      : sweep();
}
