#pragma once
// What a profiled step's timeline says about who set its pace (log.profile_step's table): how
// many operators the host ran and how long each took it, how much of the step the GPU was busy
// and in how many gaps it waited, how many kernels the host launched and how often it waited
// for the GPU. Pure: the profiler's events in, numbers out (tests build timelines by hand).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace pipetrain::device {

struct TimedEvent {
  enum class Kind {
    HostOperator,  // an ATen operator or autograd node the host ran
    Annotation,    // a named scope around operators (record_function): not work of its own
    RuntimeCall,   // a CUDA runtime or driver call on the host (a launch, a copy, a wait)
    DeviceWork,    // a kernel, copy or fill on the GPU
  };
  std::string name;
  Kind kind = Kind::HostOperator;
  uint64_t start_ns = 0, end_ns = 0;
  uint64_t thread = 0;  // the host thread (device work: ignored)
};

struct StepTimeline {
  uint64_t wall_ns = 0;  // first event's start to last event's end
  // Operators the host ran at top level: not inside another operator on the same thread
  // (autograd's "evaluate_function" wrappers and annotations do not count as enclosing), so a
  // backward node counts once and the kernels' own sub-operators not at all.
  int64_t host_operators = 0;
  uint64_t host_operator_ns = 0;  // their time
  std::map<std::string, int64_t> top_level_calls;  // by operator name
  uint64_t device_busy_ns = 0;    // the union of the GPU's work: overlaps counted once
  int64_t device_gaps = 0;        // idle stretches between the GPU's first and last work
  uint64_t longest_gap_ns = 0;
  int64_t launches = 0;  // kernel and graph launches the host made
  uint64_t launch_ns = 0;
  int64_t waits = 0;  // calls that made the host wait for the GPU (synchronize, blocking copies)
  uint64_t wait_ns = 0;
};

StepTimeline summarize_timeline(std::vector<TimedEvent> events);

// The summary as the lines that head log.profile_step's table, per step: the host's operators
// (and the `most_called` it called most often), the GPU's busy time, gaps, launches and waits.
std::string describe_timeline(const StepTimeline& timeline, double steps, size_t most_called = 12);

}  // namespace pipetrain::device
