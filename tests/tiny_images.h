#pragma once
// A tiny Fashion-MNIST-shaped folder for runs of the CNN (data.format = "fashion-mnist"): 24
// training and 8 test images of 28x28 random pixels in plain IDX files, labels i mod 10. The
// same bytes every time; made once per test process in its own folder, removed when it exits
// (no copy shared between processes that an older generator could have left behind).
#include <filesystem>
#include <random>
#include <string>

#include "data/idx_file.h"
#include "file_test_helpers.h"

namespace pipetrain::testing {

inline std::string make_tiny_image_folder() {
  const std::filesystem::path folder = test::fresh_folder("pipetrain_tiny_fashion");
  std::mt19937 random(2024);
  for (const auto& [split, count] : {std::pair<std::string, int64_t>{"train", 24}, {"t10k", 8}}) {
    IdxArray images{{count, 28, 28}, {}}, labels{{count}, {}};
    for (int64_t i = 0; i < count * 28 * 28; ++i) images.values.push_back(uint8_t(random() % 256));
    for (int64_t i = 0; i < count; ++i) labels.values.push_back(uint8_t(i % 10));
    write_idx((folder / (split + "-images-idx3-ubyte")).string(), images);
    write_idx((folder / (split + "-labels-idx1-ubyte")).string(), labels);
  }
  return folder.string();
}

inline std::string tiny_image_folder() {
  static const std::string folder = make_tiny_image_folder();
  return folder;
}

}  // namespace pipetrain::testing
