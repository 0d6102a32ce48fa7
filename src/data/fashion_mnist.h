#pragma once
// Fashion-MNIST (Debian's dataset-fashion-mnist: 28x28 grey images of 10 kinds of clothing,
// 60,000 to train on and 10,000 to test) from its IDX files, compressed or not.
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
inline constexpr int kFashionMnistClasses = 10;

struct LabelledImages {
  int64_t count = 0, height = 0, width = 0;
  std::vector<uint8_t> pixels;  // count x height x width, 0 (background) .. 255
  std::vector<uint8_t> labels;  // count, each < classes
};

struct FashionMnist {
  LabelledImages train, test;
};

// The images and labels of one split; UserError when they disagree in count, the images are not
// [count, height, width] or a label is not below `classes`.
LabelledImages read_labelled_images(const std::string& images_path, const std::string& labels_path,
                                    int classes);
// train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz], t10k-... in `dir`; a missing
// directory names the Debian package that installs it.
FashionMnist load_fashion_mnist(const std::string& dir = kFashionMnistDir);

}  // namespace pipetrain
