#include "device/reductions.h"

#include <ATen/ATen.h>

namespace pipetrain::device {
namespace {

bool reads_without_copy(const at::Tensor& tensor) {
  return !tensor.is_cpu() || tensor.scalar_type() == at::kDouble;
}

// One CPU tensor, float32 (or narrower): float32 norms of its rows, squared and summed in float64.
at::Tensor squared_sum_by_rows(const at::Tensor& tensor) {
  const at::Tensor flat = tensor.reshape({-1});  // a gradient is contiguous: a view
  const int64_t rows = flat.numel() / kSquaredSumRow, whole = rows * kSquaredSumRow;
  // (No zero to add to: two operators fewer a tensor, the same sum bit for bit.)
  at::Tensor sum;
  if (rows > 0) {
    const at::Tensor norms = at::linalg_vector_norm(flat.narrow(0, 0, whole).view({rows, kSquaredSumRow}),
                                                    2, at::IntArrayRef{1}, false, at::kFloat);
    sum = norms.to(at::kDouble).square_().sum();
  }
  if (whole < flat.numel()) {
    const at::Tensor tail = at::linalg_vector_norm(flat.narrow(0, whole, flat.numel() - whole), 2,
                                                   std::nullopt, false, at::kFloat);
    const at::Tensor squared = tail.to(at::kDouble).square();
    sum = sum.defined() ? sum + squared : squared;
  }
  return sum.defined() ? sum : at::zeros({}, tensor.options().dtype(at::kDouble));  // (empty)
}

}  // namespace

at::Tensor squared_sum(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> direct;
  std::vector<at::Tensor> partial;
  for (const at::Tensor& tensor : tensors) {
    if (reads_without_copy(tensor)) {
      direct.push_back(tensor);
    } else {
      partial.push_back(squared_sum_by_rows(tensor));
    }
  }
  if (!direct.empty()) partial.push_back(at::stack(at::_foreach_norm(direct, 2, at::kDouble)).square().sum());
  return partial.empty() ? at::zeros({}, at::kDouble) : at::stack(partial).sum();
}

}  // namespace pipetrain::device
