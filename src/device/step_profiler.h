#pragma once
// A few training steps under libtorch's Kineto profiler (log.profile_step): what every operator
// and, on a GPU, every kernel and copy cost. Writes a Chrome trace (open it in ui.perfetto.dev or
// chrome://tracing) and a plain-text table of where the time went, so a slow step can be
// explained without a Python profiler. Here because it asks which activities this hardware has.
#include <string>

namespace pipetrain::device {

class StepProfiler {
 public:
  StepProfiler() = default;
  StepProfiler(const StepProfiler&) = delete;
  StepProfiler& operator=(const StepProfiler&) = delete;
  ~StepProfiler();  // a profile still running (the run stopped early) is dropped, not written

  void start();  // CPU operators, plus CUDA kernels and copies when a GPU is seen
  bool running() const { return running_; }
  // Stops and writes PREFIX.trace.json and PREFIX.txt (the table, also returned), `steps` steps.
  std::string stop_and_write(const std::string& prefix, int64_t steps);

 private:
  bool running_ = false;
};

}  // namespace pipetrain::device
