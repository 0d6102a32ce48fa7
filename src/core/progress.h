#pragma once
// A live progress line: "step 120/600 | loss 2.345 | 12.3k tok/s | ETA 3m12s" (or another unit
// than "step": "batch 12/200 | ..."). On a terminal it rewrites itself in place; otherwise it
// prints one line every `every` steps.
#include <cstdint>
#include <cstdio>
#include <string>

namespace pipetrain {

class ProgressLine {
 public:
  ProgressLine(int64_t total_steps, int64_t every_non_tty, std::FILE* out = stderr, std::string unit = "step");
  void update(int64_t step, const std::string& fields, double seconds_per_step);
  ~ProgressLine() { finish(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  void finish();  // ends the in-place line

 private:
  int64_t total_;
  int64_t every_;
  std::FILE* out_;
  bool tty_;
  bool dirty_ = false;
  std::string unit_;
};

}  // namespace pipetrain
