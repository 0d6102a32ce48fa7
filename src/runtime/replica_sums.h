#pragma once
// Tensors summed over a group (a chunk's gradients, or its BatchNorm running statistics, over
// its data-parallel replicas) as one posted all-reduce of a flat buffer: one Gloo call, and the
// caller keeps computing until it needs the sum.
#include <vector>

#include <ATen/core/Tensor.h>

#include "runtime/comm.h"

namespace pipetrain::runtime {

class PostedFlatSum {
 public:
  // Copies `parts` into one flat buffer (their values now) and posts its sum over `group`.
  PostedFlatSum(Comm& comm, int group, const std::vector<at::Tensor>& parts);
  // Waits for the sum; returns it in pieces shaped as the parts (views of the flat buffer).
  std::vector<at::Tensor> finish();
  // Lets go of the flat buffer's bytes now, its pieces done with. Gloo's worker thread drops its
  // own reference to a finished reduction a moment after the wait returns: left to it, the
  // buffer was freed an action later on one replica and not on the other (trace.json's memory).
  void release();

 private:
  Comm* comm_;
  at::Tensor flat_;
  int handle_ = -1;
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace pipetrain::runtime
