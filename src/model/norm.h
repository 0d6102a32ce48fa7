#pragma once
// LayerNorm in its input's precision.
#include <ATen/ATen.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/nn/modules/normalization.h>

#include "device/precision.h"

namespace pipetrain {

// Under mixed precision a layer's input arrives in bfloat16 (device/precision.h). CUDA's
// autocast runs layer_norm in float32: a float32 copy of the input (kept for the backward), a
// float32 output that the next product casts back, and three passes again in the backward.
// Here a low-precision input is normalised outside autocast, by one kernel each way that reads
// and writes its dtype and keeps the statistics in float32: what the CPU's autocast already
// does, so a GPU now saves the bytes the memory model measures on the CPU. On a GPU the weight
// and bias are rounded to bfloat16 for it (device::norm_parameter), as every product's are.
inline at::Tensor layer_norm(const torch::nn::LayerNorm& norm, const at::Tensor& x) {
  const auto& options = norm->options;
  if (!at::isReducedFloatingType(x.scalar_type())) {
    return at::layer_norm(x, options.normalized_shape(), norm->weight, norm->bias, options.eps());
  }
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
  return at::layer_norm(x, options.normalized_shape(), device::norm_parameter(norm->weight, x),
                        device::norm_parameter(norm->bias, x), options.eps());
}

}  // namespace pipetrain
