#include "model/image_batch.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

namespace pipetrain {
namespace {

torch::Tensor bytes_tensor(const std::vector<uint8_t>& values, std::vector<int64_t> shape) {
  // A view of the vector's bytes: the caller copies what it selects.
  return torch::from_blob(const_cast<uint8_t*>(values.data()), shape, torch::kUInt8);
}

torch::Tensor epoch_order(uint64_t seed, int64_t epoch, int64_t count) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch + 1) * 0xD6E8FEB86659FD93ull;
  z = (z ^ (z >> 32)) * 0x94D049BB133111EBull;
  auto generator = at::detail::createCPUGenerator(z ^ (z >> 29));
  return torch::randperm(count, generator, torch::kInt64);
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
  const int64_t count = data_.train.count;
  std::vector<int64_t> chosen;
  chosen.reserve(size_t(rows));
  torch::Tensor order;
  int64_t order_epoch = -1;
  for (int64_t k = step * rows; k < (step + 1) * rows; ++k) {
    if (k / count != order_epoch) {
      order_epoch = k / count;
      order = epoch_order(seed, order_epoch, count);
    }
    chosen.push_back(order.data_ptr<int64_t>()[k % count]);
  }
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
