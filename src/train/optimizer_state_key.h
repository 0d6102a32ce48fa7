#pragma once
// The key libtorch's Optimizer::state() files a parameter's state under: the address of its
// TensorImpl. Every per-parameter map of ours beside that state uses the same key.
#include <ATen/core/Tensor.h>

namespace pipetrain {

using OptimizerStateKey = void*;

inline OptimizerStateKey optimizer_state_key(const at::Tensor& param) {
  return param.unsafeGetTensorImpl();
}

}  // namespace pipetrain
