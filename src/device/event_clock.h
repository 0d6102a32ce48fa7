#pragma once
// Times of actions as they happen on a worker's device, on the machine's monotonic clock (ms,
// shared by every process on it: the real-run timeline). On the CPU a mark reads the clock. On a
// GPU, work runs after the host queues it: a mark records a CUDA event in the stream, and
// resolve() turns the events into clock times at the end of a step, against an anchor event
// taken once per step (one synchronisation per traced step, never one per action).
#include <memory>
#include <vector>

#include <c10/core/Device.h>

namespace pipetrain::device {

class EventClock {
 public:
  explicit EventClock(const c10::Device& device);
  ~EventClock();
  EventClock(const EventClock&) = delete;
  EventClock& operator=(const EventClock&) = delete;
  // A point in the work queued so far; its index in the next resolve().
  size_t mark();
  // The clock times (ms) of the marks since the last resolve(), in order; clears them.
  std::vector<double> resolve();

 private:
  struct Gpu;
  c10::Device device_;
  std::vector<double> host_ms_;  // cpu
  std::unique_ptr<Gpu> gpu_;     // cuda: the anchor and the marks' events
};

}  // namespace pipetrain::device
