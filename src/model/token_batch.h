#pragma once
// Token windows (data/dataset.h) as the tensors a microbatch brings: int64 inputs
// [rows, seq_len] and their next-token targets as labels.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "data/dataset.h"
#include "model/batch_source.h"

namespace pipetrain {

torch::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols);
Microbatch tensors_of(const TokenBatch& batch);

// A text Dataset's batches as tensors (`data` must outlive it, or be owned through `owned`).
class TokenBatchSource : public BatchSource {
 public:
  explicit TokenBatchSource(const Dataset& data) : data_(data) {}
  explicit TokenBatchSource(std::unique_ptr<const Dataset> owned, std::string origin)
      : owned_(std::move(owned)), data_(*owned_), origin_(std::move(origin)) {}
  Microbatch train_batch(uint64_t seed, int64_t step, int64_t rows) const override {
    return tensors_of(data_.train_batch(seed, step, rows));
  }
  Microbatch val_batch(int64_t index, int64_t rows) const override {
    return tensors_of(data_.val_batch(index, rows));
  }
  std::string describe() const override;
  int64_t tokens_per_row() const override { return data_.seq_len(); }
  std::string throughput_unit() const override { return "tokens"; }

 private:
  std::unique_ptr<const Dataset> owned_;
  const Dataset& data_;
  std::string origin_;  // the file the tokens came from ("" = unnamed)
};

}  // namespace pipetrain
