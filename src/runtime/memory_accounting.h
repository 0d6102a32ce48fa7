#pragma once
// Per-worker memory accounting: a counting CPU allocator (live and peak tensor bytes) plus exact
// byte counts of what a worker holds by design, found by walking its tensors: weights,
// gradients, optimizer state. "Activations and other" is the rest of the live bytes; its peak
// during a step is the step's peak minus those three.
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "runtime/layout.h"

namespace torch::optim {
class Optimizer;
}

namespace pipetrain::runtime {

class Comm;

// Wraps the process's CPU allocator (c10::SetCPUAllocator) and counts the bytes of every tensor
// allocated after install(); tensors allocated before are freed by their own deleter and never
// counted. Thread-safe (libtorch frees from its worker threads too).
class CountingAllocator {
 public:
  static CountingAllocator& install();  // idempotent: the first call wraps, later ones return it
  int64_t live_bytes() const;
  int64_t peak_bytes() const;  // since the last reset_peak()
  void reset_peak();           // peak := live
  // A second, independent peak: one action's (trace.json), leaving the step's alone.
  int64_t window_peak_bytes() const;  // since the last reset_window_peak()
  void reset_window_peak();           // window peak := live
};

// One action's memory (bytes): its peak while it ran and what it left live.
struct ActionMemory {
  int64_t peak = -1, live = -1;
};

// A worker's tensor bytes, on its device: the step's peak (metrics.jsonl) and each traced
// action's (trace.json). On a GPU worker they are the CUDA caching allocator's, which keeps one
// peak: an action's window resets it, so the step's peak folds in the windows before it.
class MemoryWatch {
 public:
  MemoryWatch(CountingAllocator& allocator, const c10::Device& device);
  void begin_step();  // the step's peak := live
  void begin_action();
  // (graph_pools: what CUDA graphs' pools hold beyond their tensors, as in MemoryReport.)
  ActionMemory end_action(int64_t graph_pools) const;
  int64_t live_bytes() const;
  int64_t step_peak_bytes() const;  // since begin_step()
  const c10::Device& device() const { return device_; }

 private:
  CountingAllocator& allocator_;
  c10::Device device_;
  int64_t folded_device_peak_ = 0;  // the step's device peak before the current window
};

// Bytes of the distinct storages behind `tensors` (a storage shared by two tensors counts once;
// undefined tensors count nothing).
int64_t storage_bytes(const std::vector<at::Tensor>& tensors);
// Every state tensor of SGD (momentum buffer), Adam and AdamW (exp_avg, exp_avg_sq and, with
// amsgrad, max_exp_avg_sq). Throws std::logic_error for an optimizer it does not know.
std::vector<at::Tensor> optimizer_state(torch::optim::Optimizer& optimizer);
std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& parameters);

// One worker's memory, in bytes, at the end of a step.
struct MemoryReport {
  int64_t live = 0;        // counted allocator bytes alive now
  int64_t peak = 0;        // the allocator's peak during the step
  int64_t weights = 0;     // every weight tensor held (all chunks, all versions)
  int64_t gradients = 0;
  int64_t optimizer = 0;   // optimizer state (this worker's shard with ZeRO-1)
  int64_t resident_peak = 0;  // the process's resident high-water mark so far (getrusage)
  // What its CUDA graphs' memory pools hold beyond their tensors (device::PassGraphs), counted
  // in live and peak: the replays use it where the allocator's count does not look.
  int64_t graph_pools = 0;
  // peak - (weights + gradients + optimizer): stashed activations, received tensors, the
  // backward's and the optimizer's temporaries at the step's high-water mark.
  int64_t activations_peak() const { return peak - (weights + gradients + optimizer); }
  MemoryReport max_with(const MemoryReport& other) const;  // field-wise maximum
};

// On a GPU worker live and peak are the CUDA caching allocator's bytes on its device (the
// counting allocator sees only host tensors there) plus `graph_pools`; weights, gradients and
// optimizer state are counted from the tensors wherever they live.
MemoryReport measure_memory(const MemoryWatch& watch, const std::vector<at::Tensor>& parameters,
                            torch::optim::Optimizer& optimizer, int64_t graph_pools = 0);

// Every rank's report, on every rank (one all-reduce over the world group: each rank fills its
// own row of a zero matrix). A collective: all ranks call it at the same point.
std::vector<MemoryReport> gather_memory(Comm& comm, const MemoryReport& mine);
// The same in two halves: post this rank's row (every rank), and finish it (waits for every rank's
// row; a rank that does not read the table may finish it later, e.g. before posting the next).
struct PostedMemoryTable {
  at::Tensor table;
  int handle = -1;
};
PostedMemoryTable post_memory_table(Comm& comm, const MemoryReport& mine);
std::vector<MemoryReport> finish_memory_table(Comm& comm, PostedMemoryTable& posted);

// metrics.jsonl fields: mem_live_mb, mem_peak_mb, mem_weights_mb, mem_grads_mb,
// mem_optimizer_mb, mem_activations_peak_mb, mem_rss_peak_mb, mem_graph_pools_mb, each an
// array indexed by rank.
nlohmann::json memory_fields(const std::vector<MemoryReport>& by_rank);

double to_mb(int64_t bytes);  // MiB
// "stage 1 (rank 1): peak 12.3 MiB = weights 1.0 + grads 1.0 + optimizer 2.0 + activations 8.3"
std::string describe_memory(const std::string& who, const MemoryReport& report);
// One line per rank: "memory of stage 1 (rank 1): peak ...", naming replica and stages as needed.
std::vector<std::string> describe_memory_by_rank(const Layout& layout,
                                                 const std::vector<MemoryReport>& by_rank);

}  // namespace pipetrain::runtime
