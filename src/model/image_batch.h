#pragma once
// Labelled images (data/fashion_mnist.h) as the tensors a microbatch brings: images
// [rows, 1, H, W] in the model's dtype, normalised to mean 0 and deviation 1 over the training
// split, and int64 class labels [rows].
#include <cstdint>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "data/fashion_mnist.h"
#include "model/batch_source.h"

namespace pipetrain {

class ImageBatchSource : public BatchSource {
 public:
  ImageBatchSource(FashionMnist data, torch::ScalarType dtype, std::string origin);
  // The training split in a fresh order each epoch (a permutation seeded by (seed, epoch)):
  // step s takes rows [s * rows, (s + 1) * rows) of that endless sequence.
  Microbatch train_batch(uint64_t seed, int64_t step, int64_t rows) const override;
  // Rows [index * rows, (index + 1) * rows) of the test split, wrapping past its end: the
  // whole split once when eval.batches * train.batch_size equals its size.
  Microbatch val_batch(int64_t index, int64_t rows) const override;
  std::string describe() const override;
  int64_t tokens_per_row() const override { return 1; }
  std::string throughput_unit() const override { return "images"; }

 private:
  Microbatch gather(const LabelledImages& split, const torch::Tensor& indices) const;
  FashionMnist data_;
  torch::ScalarType dtype_;
  std::string origin_;
  double mean_ = 0, deviation_ = 1;  // of the training pixels (0..255)
};

// data.format = "fashion-mnist": the IDX files in data.path (resolved against data_root).
std::shared_ptr<const BatchSource> make_fashion_mnist_source(const std::string& folder,
                                                            torch::ScalarType dtype);

}  // namespace pipetrain
