#include "device/event_clock.h"

#include <chrono>
#include <utility>

#include <c10/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAStream.h>

namespace pipetrain::device {

namespace {

double clock_ms(std::chrono::steady_clock::time_point t) {  // the machine's monotonic clock, ms
  return std::chrono::duration<double, std::milli>(t.time_since_epoch()).count();
}

}  // namespace

struct EventClock::Gpu {
  std::unique_ptr<c10::cuda::CUDAEvent> anchor;  // recorded once the device was idle, at anchor_ms
  double anchor_ms = 0;
  std::vector<std::unique_ptr<c10::cuda::CUDAEvent>> marks;
};

EventClock::EventClock(const c10::Device& device) : device_(device) {
  if (device_.is_cuda()) gpu_ = std::make_unique<Gpu>();
}

EventClock::~EventClock() = default;

size_t EventClock::mark() {
  if (!gpu_) {
    host_ms_.push_back(clock_ms(std::chrono::steady_clock::now()));
    return host_ms_.size() - 1;
  }
  const auto stream = c10::cuda::getCurrentCUDAStream(device_.index());
  if (!gpu_->anchor) {  // the first mark of a step: the queue is drained, the event is "now"
    stream.synchronize();
    gpu_->anchor = std::make_unique<c10::cuda::CUDAEvent>(cudaEventDefault);
    gpu_->anchor->record(stream);
    gpu_->anchor->synchronize();
    gpu_->anchor_ms = clock_ms(std::chrono::steady_clock::now());
  }
  gpu_->marks.push_back(std::make_unique<c10::cuda::CUDAEvent>(cudaEventDefault));
  gpu_->marks.back()->record(stream);
  return gpu_->marks.size() - 1;
}

std::vector<double> EventClock::resolve() {
  if (!gpu_) return std::exchange(host_ms_, {});
  std::vector<double> times;
  if (!gpu_->marks.empty()) gpu_->marks.back()->synchronize();
  for (const auto& event : gpu_->marks) {
    times.push_back(gpu_->anchor_ms + double(gpu_->anchor->elapsed_time(*event)));
  }
  gpu_->marks.clear();
  gpu_->anchor.reset();
  return times;
}

}  // namespace pipetrain::device
