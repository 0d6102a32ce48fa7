#pragma once
// A batch of token windows (data/dataset.h) as the tensors a microbatch brings: int64 inputs
// [rows, seq_len] and their next-token targets as labels.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "data/dataset.h"
#include "model/model.h"

namespace pipetrain {

torch::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols);
Microbatch tensors_of(const TokenBatch& batch);

}  // namespace pipetrain
