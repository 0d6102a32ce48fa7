#pragma once
// Token windows (data/dataset.h) as the tensors a microbatch brings: int64 inputs
// [rows, seq_len] and their next-token targets as labels.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "data/dataset.h"
#include "model/batch_source.h"

namespace pipetrain {

torch::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols);
Microbatch tensors_of(const TokenBatch& batch);

// A text Dataset's batches as tensors (`data` must outlive it).
class TokenBatchSource : public BatchSource {
 public:
  explicit TokenBatchSource(const Dataset& data) : data_(data) {}
  Microbatch train_batch(uint64_t seed, int64_t step, int64_t rows) const override {
    return tensors_of(data_.train_batch(seed, step, rows));
  }
  Microbatch val_batch(int64_t index, int64_t rows) const override {
    return tensors_of(data_.val_batch(index, rows));
  }

 private:
  const Dataset& data_;
};

}  // namespace pipetrain
