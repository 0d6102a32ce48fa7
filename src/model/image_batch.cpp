#include "model/image_batch.h"

#include <cmath>

#include <fmt/format.h>

namespace pipetrain {
namespace {

torch::Tensor bytes_tensor(const std::vector<uint8_t>& values, std::vector<int64_t> shape) {
  // A view of the vector's bytes: the caller copies what it selects.
  return torch::from_blob(const_cast<uint8_t*>(values.data()), shape, torch::kUInt8);
}

}  // namespace

ImageBatchSource::ImageBatchSource(FashionMnist data, torch::ScalarType dtype, std::string origin)
    : data_(std::move(data)), dtype_(dtype), origin_(std::move(origin)) {
  double sum = 0, squares = 0;
  for (const uint8_t p : data_.train.pixels) {
    sum += p;
    squares += double(p) * p;
  }
  const double n = double(data_.train.pixels.size());
  mean_ = sum / n;
  deviation_ = std::sqrt(squares / n - mean_ * mean_);
}

Microbatch ImageBatchSource::gather(const LabelledImages& split, const torch::Tensor& indices) const {
  const auto images = bytes_tensor(split.pixels, {split.count, 1, split.height, split.width});
  const auto labels = bytes_tensor(split.labels, {split.count});
  return {(images.index_select(0, indices).to(dtype_) - mean_) / deviation_,
          labels.index_select(0, indices).to(torch::kInt64)};
}

Microbatch ImageBatchSource::train_batch(uint64_t seed, int64_t step, int64_t rows) const {
  const auto chosen = epoch_ordered_rows(seed, /*salt=*/0, step, rows, data_.train.count);
  return gather(data_.train, torch::tensor(chosen, torch::kInt64));
}

Microbatch ImageBatchSource::val_batch(int64_t index, int64_t rows) const {
  const auto indices = (torch::arange(rows, torch::kInt64) + index * rows).remainder(data_.test.count);
  return gather(data_.test, indices);
}

std::string ImageBatchSource::describe() const {
  return fmt::format("{} ({} training, {} test images of {}x{})", origin_, data_.train.count,
                     data_.test.count, data_.train.height, data_.train.width);
}

std::shared_ptr<const BatchSource> make_fashion_mnist_source(const std::string& folder,
                                                            torch::ScalarType dtype) {
  return std::make_shared<ImageBatchSource>(load_fashion_mnist(folder), dtype, folder);
}

}  // namespace pipetrain
