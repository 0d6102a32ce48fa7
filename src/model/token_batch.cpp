#include "model/token_batch.h"

#include <fmt/format.h>

namespace pipetrain {

torch::Tensor to_tensor(const std::vector<int64_t>& values, int64_t rows, int64_t cols) {
  return torch::tensor(values, torch::kInt64).view({rows, cols});
}

Microbatch tensors_of(const TokenBatch& batch) {
  return {to_tensor(batch.inputs, batch.batch_size, batch.seq_len),
          to_tensor(batch.targets, batch.batch_size, batch.seq_len)};
}

std::string TokenBatchSource::describe() const {
  return fmt::format("{}{} train / {} val tokens", origin_.empty() ? "" : origin_ + ": ",
                     data_.train_tokens(), data_.val_tokens());
}

}  // namespace pipetrain
