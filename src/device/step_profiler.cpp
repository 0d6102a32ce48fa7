#include "device/step_profiler.h"

#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "core/files.h"
#include "device/placement.h"
#include "device/step_timeline.h"

namespace pipetrain::device {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

std::set<ActivityType> activities() {
  std::set<ActivityType> kinds{ActivityType::CPU};
  if (this_hardware().gpus > 0) kinds.insert(ActivityType::CUDA);
  return kinds;
}

// Work the GPU itself did: kernels, copies, fills (not host operators that merely name a CUDA
// tensor, such as Gloo's send of one).
bool on_the_gpu(const profiler::KinetoEvent& e) {
  const auto type = static_cast<libkineto::ActivityType>(e.activityType());
  return type == libkineto::ActivityType::CONCURRENT_KERNEL ||
         type == libkineto::ActivityType::GPU_MEMCPY || type == libkineto::ActivityType::GPU_MEMSET;
}

// The event as the timeline summary sees it (kinds it does not use: none).
std::optional<TimedEvent> timed(const profiler::KinetoEvent& e) {
  using Kind = TimedEvent::Kind;
  std::optional<Kind> kind;
  switch (static_cast<libkineto::ActivityType>(e.activityType())) {
    case libkineto::ActivityType::CPU_OP: kind = Kind::HostOperator; break;
    case libkineto::ActivityType::USER_ANNOTATION: kind = Kind::Annotation; break;
    case libkineto::ActivityType::CUDA_RUNTIME:
    case libkineto::ActivityType::CUDA_DRIVER: kind = Kind::RuntimeCall; break;
    default: if (on_the_gpu(e)) kind = Kind::DeviceWork;
  }
  if (!kind) return std::nullopt;
  return TimedEvent{e.name(), *kind, e.startNs(), e.endNs(), e.startThreadId()};
}

struct Total {
  uint64_t ns = 0;
  int64_t count = 0;
};

// The `top` largest totals, largest first, as table rows; names cut to stay on one line.
std::string rows_of(const std::map<std::string, Total>& totals, uint64_t whole_ns, double steps,
                    size_t top) {
  std::vector<std::pair<std::string, Total>> sorted(totals.begin(), totals.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.second.ns > b.second.ns; });
  std::string text;
  for (size_t i = 0; i < std::min(top, sorted.size()); ++i) {
    const auto& [name, total] = sorted[i];
    const std::string shown = name.size() > 90 ? name.substr(0, 87) + "..." : name;
    text += fmt::format("  {:>10.3f} {:>6.1f}% {:>8.0f}  {}\n", 1e-6 * double(total.ns) / steps,
                        whole_ns ? 100.0 * double(total.ns) / double(whole_ns) : 0.0,
                        double(total.count) / steps, shown);
  }
  return text;
}

// Per step: wall time, who set the pace (device/step_timeline.h), the costliest kernels and
// operators. Operator times are inclusive (an aten::linear holds its aten::addmm).
std::string table_of(const std::vector<profiler::KinetoEvent>& events, int64_t steps) {
  std::map<std::string, Total> kernels, operators;
  std::vector<TimedEvent> timeline;
  uint64_t first = UINT64_MAX, last = 0, gpu_ns = 0;
  for (const auto& e : events) {
    first = std::min(first, e.startNs());
    last = std::max(last, e.endNs());
    const bool gpu = on_the_gpu(e);
    auto& total = gpu ? kernels[e.name()] : operators[e.name()];
    total.ns += e.durationNs();
    total.count += 1;
    if (gpu) gpu_ns += e.durationNs();
    if (auto event = timed(e)) timeline.push_back(std::move(*event));
  }
  const uint64_t wall_ns = last > first ? last - first : 0;
  const double n = double(std::max<int64_t>(1, steps));
  std::string text = fmt::format("{} step(s) profiled: {:.3f} ms per step (first to last event)\n",
                                 steps, 1e-6 * double(wall_ns) / n);
  text += describe_timeline(summarize_timeline(std::move(timeline)), n);
  if (!kernels.empty()) {
    text += "\nGPU kernels and copies: ms/step, share of GPU time (overlaps counted twice), calls/step\n";
    text += rows_of(kernels, gpu_ns, n, 25);
  }
  text += "\nOperators (host, inclusive): ms/step, share of the step, calls/step\n";
  text += rows_of(operators, wall_ns, n, 25);
  return text;
}

}  // namespace

StepProfiler::~StepProfiler() {
  if (running_) profiler::disableProfiler();
}

void StepProfiler::start() {
  const ProfilerConfig config(ProfilerState::KINETO);
  const auto kinds = activities();
  profiler::prepareProfiler(config, kinds);
  profiler::enableProfiler(config, kinds);
  running_ = true;
}

std::string StepProfiler::stop_and_write(const std::string& prefix, int64_t steps) {
  running_ = false;
  const std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
  result->save(prefix + ".trace.json");
  const std::string table = table_of(result->events(), steps);
  write_file_atomically(prefix + ".txt", table);
  return table;
}

}  // namespace pipetrain::device
