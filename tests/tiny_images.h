#pragma once
// A tiny Fashion-MNIST-shaped folder for runs of the CNN (data.format = "fashion-mnist"): 24
// training and 8 test images of 28x28 random pixels in plain IDX files, labels i mod 10. The
// same bytes every time; made once per machine (a temporary folder renamed into place, so
// parallel tests never see half a folder).
#include <filesystem>
#include <random>
#include <string>

#include <unistd.h>

#include "data/idx_file.h"

namespace pipetrain::testing {

inline std::string tiny_image_folder() {
  namespace fs = std::filesystem;
  // v1: bump it with any change below, so no machine-wide copy of an older generator is read.
  const fs::path folder = fs::temp_directory_path() / "pipetrain_tiny_fashion_v1";
  if (fs::exists(folder / "t10k-labels-idx1-ubyte")) return folder.string();
  const fs::path partial = folder.string() + ".partial" + std::to_string(getpid());
  fs::create_directories(partial);
  std::mt19937 random(2024);
  for (const auto& [split, count] : {std::pair<std::string, int64_t>{"train", 24}, {"t10k", 8}}) {
    IdxArray images{{count, 28, 28}, {}}, labels{{count}, {}};
    for (int64_t i = 0; i < count * 28 * 28; ++i) images.values.push_back(uint8_t(random() % 256));
    for (int64_t i = 0; i < count; ++i) labels.values.push_back(uint8_t(i % 10));
    write_idx((partial / (split + "-images-idx3-ubyte")).string(), images);
    write_idx((partial / (split + "-labels-idx1-ubyte")).string(), labels);
  }
  std::error_code taken;  // another test process made it first: the same bytes
  fs::rename(partial, folder, taken);
  if (taken) fs::remove_all(partial);
  return folder.string();
}

}  // namespace pipetrain::testing
