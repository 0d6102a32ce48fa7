#include "runtime/memory_accounting.h"

#include <sys/resource.h>

#include <c10/core/CPUAllocator.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "device/placement.h"
#include "runtime/comm.h"
#include "train/error_feedback.h"

namespace pipetrain::runtime {
namespace {

// The counters live in one static object because a DataPtr's deleter is a plain function
// pointer: it cannot carry a reference to an allocator instance.
struct Counters {
  std::atomic<int64_t> live{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> window_peak{0};  // since the last action's start (trace.json)
  std::mutex mutex;
  std::unordered_map<void*, size_t> sizes;  // live block -> bytes
  c10::DeleterFnPtr base_deleter = nullptr;

  void add(void* data, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      sizes.emplace(data, bytes);
    }
    const int64_t now = live.fetch_add(int64_t(bytes)) + int64_t(bytes);
    raise(peak, now);
    raise(window_peak, now);
  }
  static void raise(std::atomic<int64_t>& high, int64_t now) {
    int64_t seen = high.load();
    while (now > seen && !high.compare_exchange_weak(seen, now)) {
    }
  }
  void remove(void* data) {
    size_t bytes = 0;
    {
      std::lock_guard<std::mutex> lock(mutex);
      const auto it = sizes.find(data);
      if (it != sizes.end()) {
        bytes = it->second;
        sizes.erase(it);
      }
    }
    live.fetch_sub(int64_t(bytes));
  }
};

Counters& counters() {
  static Counters instance;
  return instance;
}

void counting_delete(void* data) {
  counters().remove(data);
  counters().base_deleter(data);
}

// Keeps the base allocator's blocks (context == data, freed by its raw deleter, as c10's
// DefaultCPUAllocator does), so raw_allocate/raw_deallocate keep working through the wrapper.
class CountingCpuAllocator final : public c10::Allocator {
 public:
  explicit CountingCpuAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t bytes) override {
    c10::DataPtr inner = base_->allocate(bytes);
    void* data = inner.get();
    if (data == nullptr || inner.get_context() != data ||
        inner.get_deleter() != counters().base_deleter) {
      return inner;  // not a plain block of the base allocator: left uncounted
    }
    inner.release_context();
    counters().add(data, bytes);
    return {data, data, &counting_delete, inner.device()};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &counting_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

 private:
  c10::Allocator* base_;
};

}  // namespace

CountingAllocator& CountingAllocator::install() {
  static CountingAllocator handle;
  static std::once_flag once;
  std::call_once(once, [] {
    c10::Allocator* base = c10::GetCPUAllocator();
    counters().base_deleter = base->raw_deleter();
    if (counters().base_deleter == nullptr) {
      throw std::logic_error("memory accounting: the CPU allocator has no raw deleter");
    }
    static CountingCpuAllocator wrapper(base);
    c10::SetCPUAllocator(&wrapper, /*priority=*/100);
  });
  return handle;
}

int64_t CountingAllocator::live_bytes() const { return counters().live.load(); }
int64_t CountingAllocator::peak_bytes() const { return counters().peak.load(); }
void CountingAllocator::reset_peak() { counters().peak.store(counters().live.load()); }
int64_t CountingAllocator::window_peak_bytes() const { return counters().window_peak.load(); }
void CountingAllocator::reset_window_peak() { counters().window_peak.store(counters().live.load()); }

MemoryWatch::MemoryWatch(CountingAllocator& allocator, const c10::Device& device)
    : allocator_(allocator), device_(device) {}

void MemoryWatch::begin_step() {
  allocator_.reset_peak();
  device::reset_peak_memory(device_);
  folded_device_peak_ = 0;
}

void MemoryWatch::begin_action() {
  allocator_.reset_window_peak();
  if (const auto gpu = device::device_memory(device_)) {
    folded_device_peak_ = std::max(folded_device_peak_, gpu->peak);
    device::reset_peak_memory(device_);
  }
}

ActionMemory MemoryWatch::end_action(int64_t graph_pools) const {
  if (const auto gpu = device::device_memory(device_)) {
    return {gpu->peak + graph_pools, gpu->allocated + graph_pools};
  }
  return {allocator_.window_peak_bytes(), allocator_.live_bytes()};
}

int64_t MemoryWatch::live_bytes() const {
  const auto gpu = device::device_memory(device_);
  return gpu ? gpu->allocated : allocator_.live_bytes();
}

int64_t MemoryWatch::step_peak_bytes() const {
  const auto gpu = device::device_memory(device_);
  return gpu ? std::max(folded_device_peak_, gpu->peak) : allocator_.peak_bytes();
}

int64_t storage_bytes(const std::vector<at::Tensor>& tensors) {
  std::unordered_set<const void*> seen;
  int64_t total = 0;
  for (const auto& t : tensors) {
    if (!t.defined() || !t.has_storage()) continue;
    if (seen.insert(t.storage().data()).second) total += int64_t(t.storage().nbytes());
  }
  return total;
}

std::vector<at::Tensor> optimizer_state(torch::optim::Optimizer& optimizer) {
  std::vector<at::Tensor> out;
  for (const auto& [key, state] : optimizer.state()) {
    if (auto* adam = dynamic_cast<torch::optim::AdamParamState*>(state.get())) {
      out.insert(out.end(), {adam->exp_avg(), adam->exp_avg_sq(), adam->max_exp_avg_sq()});
    } else if (auto* adamw = dynamic_cast<torch::optim::AdamWParamState*>(state.get())) {
      out.insert(out.end(), {adamw->exp_avg(), adamw->exp_avg_sq(), adamw->max_exp_avg_sq()});
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(state.get())) {
      out.push_back(sgd->momentum_buffer());
    } else {
      throw std::logic_error("memory accounting: an optimizer state of an unknown kind");
    }
  }
  if (auto* memory = dynamic_cast<UpdateMemory*>(&optimizer)) {  // error feedback's u(t-1)
    for (const auto& [key, update] : memory->previous_updates()) out.push_back(update);
  }
  return out;
}

std::vector<at::Tensor> gradients_of(const std::vector<at::Tensor>& parameters) {
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters) grads.push_back(p.grad());
  return grads;
}

MemoryReport MemoryReport::max_with(const MemoryReport& other) const {
  return {std::max(live, other.live), std::max(peak, other.peak),
          std::max(weights, other.weights), std::max(gradients, other.gradients),
          std::max(optimizer, other.optimizer), std::max(resident_peak, other.resident_peak),
          std::max(graph_pools, other.graph_pools)};
}

MemoryReport measure_memory(const MemoryWatch& watch, const std::vector<at::Tensor>& parameters,
                            torch::optim::Optimizer& optimizer, int64_t graph_pools) {
  MemoryReport report;
  report.live = watch.live_bytes();
  report.peak = watch.step_peak_bytes();
  if (watch.device().is_cuda()) {
    report.graph_pools = graph_pools;
    report.live += graph_pools;
    report.peak += graph_pools;
  }
  report.weights = storage_bytes(parameters);
  report.gradients = storage_bytes(gradients_of(parameters));
  report.optimizer = storage_bytes(optimizer_state(optimizer));
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  report.resident_peak = int64_t(usage.ru_maxrss) * 1024;  // KiB on Linux
  return report;
}

PostedMemoryTable post_memory_table(Comm& comm, const MemoryReport& mine) {
  constexpr int kFields = 7;
  PostedMemoryTable posted{torch::zeros({comm.world_size(), kFields}, torch::kFloat64), -1};
  const int64_t fields[kFields] = {mine.live,      mine.peak,          mine.weights,
                                   mine.gradients, mine.optimizer,     mine.resident_peak,
                                   mine.graph_pools};
  for (int f = 0; f < kFields; ++f) posted.table[comm.rank()][f] = double(fields[f]);
  posted.handle = comm.post_all_reduce_sum(posted.table, Comm::kWorld);
  return posted;
}

std::vector<MemoryReport> finish_memory_table(Comm& comm, PostedMemoryTable& posted) {
  comm.wait_all_reduce(posted.handle);
  posted.handle = -1;
  std::vector<MemoryReport> all;
  auto rows = posted.table.accessor<double, 2>();
  for (int r = 0; r < comm.world_size(); ++r) {
    // Doubles hold byte counts exactly up to 2^53; each row has one non-zero contribution.
    all.push_back({int64_t(rows[r][0]), int64_t(rows[r][1]), int64_t(rows[r][2]),
                   int64_t(rows[r][3]), int64_t(rows[r][4]), int64_t(rows[r][5]),
                   int64_t(rows[r][6])});
  }
  return all;
}

std::vector<MemoryReport> gather_memory(Comm& comm, const MemoryReport& mine) {
  PostedMemoryTable posted = post_memory_table(comm, mine);
  return finish_memory_table(comm, posted);
}

nlohmann::json memory_fields(const std::vector<MemoryReport>& by_rank) {
  nlohmann::json live, peak, weights, grads, optimizer, activations, resident, pools;
  for (const auto& r : by_rank) {
    live.push_back(to_mb(r.live));
    peak.push_back(to_mb(r.peak));
    weights.push_back(to_mb(r.weights));
    grads.push_back(to_mb(r.gradients));
    optimizer.push_back(to_mb(r.optimizer));
    activations.push_back(to_mb(r.activations_peak()));
    resident.push_back(to_mb(r.resident_peak));
    pools.push_back(to_mb(r.graph_pools));
  }
  return {{"mem_live_mb", live},           {"mem_peak_mb", peak},
          {"mem_weights_mb", weights},     {"mem_grads_mb", grads},
          {"mem_optimizer_mb", optimizer}, {"mem_activations_peak_mb", activations},
          {"mem_rss_peak_mb", resident},   {"mem_graph_pools_mb", pools}};
}

double to_mb(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

std::string describe_memory(const std::string& who, const MemoryReport& r) {
  const std::string pools =
      r.graph_pools > 0 ? fmt::format(" (of which CUDA graphs' pools {:.1f})", to_mb(r.graph_pools))
                        : "";
  return fmt::format("{}: peak {:.1f} MiB = weights {:.1f} + grads {:.1f} + optimizer {:.1f} + "
                     "activations and other {:.1f}{}",
                     who, to_mb(r.peak), to_mb(r.weights), to_mb(r.gradients), to_mb(r.optimizer),
                     to_mb(r.activations_peak()), pools);
}

std::vector<std::string> describe_memory_by_rank(const Layout& layout,
                                                 const std::vector<MemoryReport>& by_rank) {
  std::vector<std::string> lines;
  for (int rank = 0; rank < int(by_rank.size()); ++rank) {
    const Layout of = Layout::of_rank(layout, rank);
    std::vector<int> stages;
    for (int c = 0; c < of.chunks; ++c) stages.push_back(of.stage_of(c));
    std::string who = fmt::format("memory of stage{} {}", stages.size() > 1 ? "s" : "",
                                  fmt::join(stages, ","));
    if (of.replicas > 1) who += fmt::format(" replica {}", of.replica());
    lines.push_back(describe_memory(who + fmt::format(" (rank {})", rank), by_rank[size_t(rank)]));
  }
  return lines;
}

}  // namespace pipetrain::runtime
