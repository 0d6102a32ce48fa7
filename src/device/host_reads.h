#pragma once
// What makes the host wait for a GPU, and what a CUDA graph cannot capture: a value read on the
// host (item(), aten::_local_scalar_dense). HostReads counts them while it lives, on any device
// (on a CPU the same code reads the same values, for free), and says where each happened: in the
// host's own code or inside an operator. `pipetrain profile` reports them per layer; tests hold
// hot paths to their documented reads without a GPU. Not seen: a tensor copied to the host
// (`.to(kCPU)` of a GPU tensor waits too, but on a CPU it is the tensor itself, and a copy of
// data that was on the host all along looks the same).
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/record_function.h>

namespace pipetrain::device {

// Marks, for its lifetime, a read only a CPU makes (an input check that a GPU leaves to its
// kernels' own assertions): HostReads leaves it out.
class CpuOnlyRead {
 public:
  CpuOnlyRead();

 private:
  at::RecordFunction scope_;
};

class HostReads {
 public:
  // Counts on this thread (a CPU's autograd runs a backward on the calling thread); one at a
  // time on a thread (std::logic_error for a second).
  HostReads();
  ~HostReads();
  HostReads(const HostReads&) = delete;
  HostReads& operator=(const HostReads&) = delete;

  struct Read {
    std::string inside;  // the innermost operator it happened in; "" = the host's own code
    int64_t after = -1;  // index into dispatched() of the last operator the host called before it
  };
  const std::vector<Read>& reads() const;
  const std::vector<std::string>& dispatched() const;  // every operator, in order, nested ones too

  int64_t values() const { return int64_t(reads().size()); }
  // Values the host's own code read after the last dispatch of `op` (default: all of them;
  // std::invalid_argument if `op` was not dispatched).
  int64_t values_read_by_host_code(const std::string& after_op = "") const;
  int64_t values_read_inside(const std::string& op) const;
  int64_t value_dependent_shapes() const { return count("aten::nonzero"); }
  int64_t count(const std::string& op) const;  // dispatches of `op`
  // Each read and where ("host after aten::sum", "aten::_fused_adamw_"), for messages.
  std::string describe() const;
  // The same grouped by place, most first: "2 x host after aten::div, 30 x inside aten::mm".
  std::string describe_grouped() const;

 private:
  at::CallbackHandle handle_;
};

}  // namespace pipetrain::device
