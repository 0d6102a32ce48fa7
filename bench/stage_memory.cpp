// Measured peak activation memory per pipeline stage vs. the schedule's in-flight count.
//
// For each (p, schedule, m) it runs the real `pipetrain train` (worker processes) for a few
// steps and reads each worker's mem_activations_peak_mb from the last metrics line (the counting
// allocator's step peak minus weights, gradients and optimizer state). Next to it: the
// validator's peak in-flight microbatches on that worker (GPipe m, 1F1B min(p - s, m)) times the
// measured bytes one microbatch keeps on that stage between its forward and its backward
// (measured in this process: the stage's forward, plus the loss on the last stage, plus the
// received input on later stages). Memory, not time: no benchmark lock needed.
//
// Usage: stage_memory [--quick]   (--quick: p = 2 only)
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "io/metrics.h"
#include <ATen/CPUGeneratorImpl.h>

#include "model/registry.h"
#include "runtime/memory_accounting.h"
#include "runtime/run_spec.h"
#include "schedule/generators.h"
#include "schedule/validate.h"

namespace fs = std::filesystem;
using namespace pipetrain;

namespace {

constexpr int64_t kMicroRows = 4;

Config bench_config(int stages, const std::string& schedule, int m) {
  Config c;
  c.model.layers = 6;
  c.model.d_model = 128;
  c.model.heads = 4;
  c.model.seq_len = 128;
  c.train.batch_size = kMicroRows * m;
  c.train.microbatches = m;
  c.train.steps = 3;
  c.train.threads = 1;
  c.pipeline.stages = stages;
  c.pipeline.schedule = schedule;
  return c;
}

std::string train_args(const Config& c, const fs::path& dir) {
  return fmt::format(
      "train --quiet --overwrite --model.layers {} --model.d_model {} --model.heads {} "
      "--model.seq_len {} --train.batch_size {} --train.microbatches {} --train.steps {} "
      "--train.threads 1 --log.every 1 --eval.every 0 --eval.batches 1 --sample.tokens 0 "
      "--pipeline.stages {} --pipeline.schedule {} --run-dir {}",
      c.model.layers, c.model.d_model, c.model.heads, c.model.seq_len, c.train.batch_size,
      c.train.microbatches, c.train.steps, c.pipeline.stages, c.pipeline.schedule, dir.string());
}

// Bytes one microbatch keeps alive on the stage from its forward to its backward.
int64_t microbatch_activation_bytes(const Config& c, const runtime::StageRange& range) {
  auto& allocator = runtime::CountingAllocator::install();
  const auto model = make_model(c);
  const bool first = range.first == 0, last = range.last == model->layer_count();
  auto stage = model->make_stage(range.first, range.last);
  auto generator = at::detail::createCPUGenerator(uint64_t(c.train.seed));
  const Microbatch example = model->example(kMicroRows, generator);
  const TensorSpec received = model->boundary_spec(std::max<int64_t>(range.first, 1), kMicroRows);
  torch::Tensor input = first ? example.inputs
                              : torch::randn(received.shape, torch::dtype(received.dtype).requires_grad(true));
  const int64_t before = allocator.live_bytes();
  auto output = stage->forward(input);
  // The runtime keeps the loss, its graph keeps the rest.
  if (last) output = stage->loss(output, example.labels);
  const int64_t kept = allocator.live_bytes() - before;
  return kept + (first ? 0 : input.nbytes());  // later stages also keep the received input
}

std::vector<double> measured_activation_peaks_mb(const Config& c) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("pipetrain_stage_memory_{}", getpid());
  const std::string command = fmt::format("{}/pipetrain {} > {}.log 2>&1", PIPETRAIN_BINARY_DIR,
                                          train_args(c, dir), dir.string());
  if (std::system(command.c_str()) != 0) {
    fmt::print(stderr, "stage_memory: run failed, see {}.log\n", dir.string());
    std::exit(1);
  }
  const auto records = read_metrics((dir / "metrics.jsonl").string());
  std::vector<double> peaks = records.back()["mem_activations_peak_mb"];
  fs::remove_all(dir);
  fs::remove(dir.string() + ".log");
  return peaks;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  torch::set_num_threads(1);
  fmt::print("| p | schedule | m | stage | in-flight (validator) | one microbatch (MB) | "
             "in-flight x one (MB) | measured peak activations (MB) | measured / predicted |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  for (int p : quick ? std::vector<int>{2} : std::vector<int>{2, 4}) {
    for (const std::string schedule : {"gpipe", "1f1b"}) {
      for (int m : {2, 4, 8}) {
        const Config c = bench_config(p, schedule, m);
        const auto ranges = runtime::make_run_spec(c).ranges;
        schedule::ScheduleSpec spec;
        spec.name = schedule;
        spec.stages = p;
        spec.microbatches = m;
        const auto stats = schedule::validate_or_throw(schedule::make_schedule(spec));
        const auto measured = measured_activation_peaks_mb(c);
        for (int s = 0; s < p; ++s) {
          const double one = runtime::to_mb(microbatch_activation_bytes(c, ranges[size_t(s)]));
          const int inflight = stats.peak_inflight[size_t(s)];
          const double predicted = inflight * one;
          fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n", p,
                     schedule, m, s, inflight, one, predicted, measured[size_t(s)],
                     measured[size_t(s)] / predicted);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
