#include "data/fashion_mnist.h"

#include <filesystem>

#include "core/error.h"
#include "data/idx_file.h"

namespace pipetrain {
namespace {

// The file as shipped (gzip) or as a user unpacked it.
std::string idx_path(const std::string& dir, const std::string& name) {
  const std::string plain = dir + "/" + name;
  if (std::filesystem::exists(plain)) return plain;
  return plain + ".gz";
}

LabelledImages split_of(const std::string& dir, const std::string& prefix) {
  return read_labelled_images(idx_path(dir, prefix + "-images-idx3-ubyte"),
                              idx_path(dir, prefix + "-labels-idx1-ubyte"), kFashionMnistClasses);
}

}  // namespace

LabelledImages read_labelled_images(const std::string& images_path, const std::string& labels_path,
                                    int classes) {
  IdxArray images = read_idx(images_path);
  IdxArray labels = read_idx(labels_path);
  if (images.dims.size() != 3) fail("{}: images must be [count, height, width], got {} dimensions", images_path, images.dims.size());
  if (labels.dims.size() != 1) fail("{}: labels must be one dimension, got {}", labels_path, labels.dims.size());
  if (images.dims[0] != labels.dims[0]) {
    fail("{} holds {} images but {} holds {} labels", images_path, images.dims[0], labels_path, labels.dims[0]);
  }
  for (size_t i = 0; i < labels.values.size(); ++i) {
    if (labels.values[i] >= classes) {
      fail("{}: label {} of item {} is outside the {} classes", labels_path, int(labels.values[i]), i, classes);
    }
  }
  return {images.dims[0], images.dims[1], images.dims[2], std::move(images.values), std::move(labels.values)};
}

FashionMnist load_fashion_mnist(const std::string& dir) {
  if (!std::filesystem::is_directory(dir)) {
    fail("Fashion-MNIST not found in {} (install the Debian package dataset-fashion-mnist, or point "
         "data.path at a folder holding its IDX files)", dir);
  }
  return {split_of(dir, "train"), split_of(dir, "t10k")};
}

}  // namespace pipetrain
