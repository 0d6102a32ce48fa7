#include "device/step_timeline.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace pipetrain::device {
namespace {

using Kind = TimedEvent::Kind;

bool contains(const std::string& text, const char* part) { return text.find(part) != std::string::npos; }
bool starts_with(const std::string& text, const char* prefix) { return text.rfind(prefix, 0) == 0; }

// The autograd engine's wrapper around each backward node: the node inside is the operator.
bool is_engine_wrapper(const TimedEvent& e) {
  return starts_with(e.name, "autograd::engine::evaluate_function");
}

bool launches_work(const std::string& call) { return contains(call, "Launch"); }

// A synchronisation, or a copy without "Async" (it returns once the GPU has done it).
bool waits_for_device(const std::string& call) {
  const bool copy = starts_with(call, "cudaMemcpy") || starts_with(call, "cuMemcpy");
  return contains(call, "Synchronize") || (copy && !contains(call, "Async"));
}

// Per thread, the operators no other operator on that thread encloses.
void count_top_level_operators(const std::vector<TimedEvent>& events, StepTimeline& timeline) {
  std::map<uint64_t, std::vector<const TimedEvent*>> by_thread;
  for (const auto& e : events) {
    if (e.kind == Kind::HostOperator && !is_engine_wrapper(e)) by_thread[e.thread].push_back(&e);
  }
  for (auto& [thread, operators] : by_thread) {
    // Enclosing first: by start, then the longer one.
    std::sort(operators.begin(), operators.end(), [](const TimedEvent* a, const TimedEvent* b) {
      return a->start_ns != b->start_ns ? a->start_ns < b->start_ns : a->end_ns > b->end_ns;
    });
    std::vector<uint64_t> open_ends;
    for (const TimedEvent* e : operators) {
      while (!open_ends.empty() && open_ends.back() <= e->start_ns) open_ends.pop_back();
      if (open_ends.empty()) {
        timeline.host_operators += 1;
        timeline.host_operator_ns += e->end_ns - e->start_ns;
        timeline.top_level_calls[e->name] += 1;
      }
      open_ends.push_back(e->end_ns);
    }
  }
}

// The GPU's work merged into disjoint busy stretches: their length and the gaps between them.
void measure_device_work(const std::vector<TimedEvent>& events, StepTimeline& timeline) {
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& e : events) {
    if (e.kind == Kind::DeviceWork) spans.emplace_back(e.start_ns, e.end_ns);
  }
  std::sort(spans.begin(), spans.end());
  bool open = false;
  uint64_t start = 0, end = 0;
  for (const auto& [s, e] : spans) {
    if (open && s <= end) {
      end = std::max(end, e);
      continue;
    }
    if (open) {
      timeline.device_busy_ns += end - start;
      timeline.device_gaps += 1;
      timeline.longest_gap_ns = std::max(timeline.longest_gap_ns, s - end);
    }
    open = true;
    start = s;
    end = e;
  }
  if (open) timeline.device_busy_ns += end - start;
}

void count_runtime_calls(const std::vector<TimedEvent>& events, StepTimeline& timeline) {
  for (const auto& e : events) {
    if (e.kind != Kind::RuntimeCall) continue;
    if (launches_work(e.name)) {
      timeline.launches += 1;
      timeline.launch_ns += e.end_ns - e.start_ns;
    } else if (waits_for_device(e.name)) {
      timeline.waits += 1;
      timeline.wait_ns += e.end_ns - e.start_ns;
    }
  }
}

// "  most called: 34 aten::add_, 30 aten::to, ..." (calls a step), most first, then by name.
std::string most_called_line(const std::map<std::string, int64_t>& calls, double steps, size_t count) {
  if (calls.empty() || count == 0) return "";
  std::vector<std::pair<std::string, int64_t>> sorted(calls.begin(), calls.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  sorted.resize(std::min(count, sorted.size()));
  std::string text = "  most called:";
  for (size_t i = 0; i < sorted.size(); ++i) {
    text += fmt::format("{} {:.0f} {}", i == 0 ? "" : ",", double(sorted[i].second) / steps, sorted[i].first);
  }
  return text + "\n";
}

}  // namespace

StepTimeline summarize_timeline(std::vector<TimedEvent> events) {
  StepTimeline timeline;
  if (events.empty()) return timeline;
  uint64_t first = UINT64_MAX, last = 0;
  for (const auto& e : events) {
    first = std::min(first, e.start_ns);
    last = std::max(last, e.end_ns);
  }
  timeline.wall_ns = last - first;
  count_top_level_operators(events, timeline);
  measure_device_work(events, timeline);
  count_runtime_calls(events, timeline);
  return timeline;
}

std::string describe_timeline(const StepTimeline& t, double steps, size_t most_called) {
  const double n = std::max(1.0, steps);
  const auto ms = [n](uint64_t ns) { return 1e-6 * double(ns) / n; };
  const auto us_each = [](uint64_t ns, int64_t count) { return count > 0 ? 1e-3 * double(ns) / double(count) : 0.0; };
  const auto share = [&t](uint64_t ns) { return t.wall_ns > 0 ? 100.0 * double(ns) / double(t.wall_ns) : 0.0; };
  std::string text = fmt::format(
      "Host: {:.0f} operators a step at top level (autograd's backward nodes included), {:.1f} us "
      "each on average, {:.1f}% of the step\n",
      double(t.host_operators) / n, us_each(t.host_operator_ns, t.host_operators), share(t.host_operator_ns));
  text += most_called_line(t.top_level_calls, n, most_called);
  if (t.device_busy_ns == 0 && t.launches == 0) return text;
  text += fmt::format(
      "GPU: busy {:.3f} ms a step ({:.1f}%), idle in {:.0f} gaps a step (the longest {:.3f} ms); "
      "the host launched {:.0f} kernels or graphs a step ({:.1f} us each) and waited for the GPU "
      "{:.0f} times a step ({:.3f} ms)\n",
      ms(t.device_busy_ns), share(t.device_busy_ns), double(t.device_gaps) / n,
      1e-6 * double(t.longest_gap_ns), double(t.launches) / n, us_each(t.launch_ns, t.launches),
      double(t.waits) / n, ms(t.wait_ns));
  return text;
}

}  // namespace pipetrain::device
