#include "runtime/replica_sums.h"

#include <ATen/ATen.h>

namespace pipetrain::runtime {

PostedFlatSum::PostedFlatSum(Comm& comm, int group, const std::vector<at::Tensor>& parts)
    : comm_(&comm) {
  std::vector<at::Tensor> flat_parts;
  for (const auto& part : parts) {
    flat_parts.push_back(part.reshape({-1}));
    shapes_.push_back(part.sizes().vec());
  }
  flat_ = at::cat(flat_parts);
  handle_ = comm.post_all_reduce_sum(flat_, group);
}

std::vector<at::Tensor> PostedFlatSum::finish() {
  comm_->wait_all_reduce(handle_);
  std::vector<at::Tensor> pieces;
  int64_t offset = 0;
  for (const auto& shape : shapes_) {
    const int64_t numel = c10::multiply_integers(shape);
    pieces.push_back(flat_.slice(0, offset, offset + numel).view(shape));
    offset += numel;
  }
  return pieces;
}

void PostedFlatSum::release() {
  if (flat_.defined()) flat_.storage().unsafeGetStorageImpl()->reset();  // (the reduction is done)
  flat_ = at::Tensor();
}

}  // namespace pipetrain::runtime
