#pragma once
// y = x W^T + b through ATen's own op.
#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

namespace pipetrain {

// torch::nn::Linear's forward (libtorch's C++ frontend) runs an input of more than 2 dimensions
// as matmul and then `+= bias`: a second pass over the output, and in its backward, under
// autocast, a float32 copy of the whole output gradient for the float32 bias. at::linear folds
// a contiguous input's rows into one addmm with the bias inside the product (cuBLASLt's epilogue
// on a GPU), as PyTorch's nn.Linear does.
inline at::Tensor linear(const torch::nn::Linear& layer, const at::Tensor& x) {
  return at::linear(x, layer->weight, layer->bias);
}

}  // namespace pipetrain
