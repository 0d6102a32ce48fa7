// IDX files (MNIST's format), plain and gzip, and Fashion-MNIST as Debian ships it.
#include <gtest/gtest.h>
#include <zlib.h>

#include <array>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "data/fashion_mnist.h"
#include "data/idx_file.h"
#include "../file_test_helpers.h"
#include "../user_error.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

// This process's own folder, emptied at its first use and removed at exit.
fs::path scratch(const std::string& name) {
  static const struct Folder {
    fs::path path = test::fresh_folder("pipetrain_idx_test");
    ~Folder() { fs::remove_all(path); }
  } folder;
  return folder.path / name;
}

std::vector<uint8_t> bytes_of(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void gzip(const fs::path& from, const fs::path& to) {
  const auto bytes = bytes_of(from);
  gzFile out = gzopen(to.c_str(), "wb");
  gzwrite(out, bytes.data(), unsigned(bytes.size()));
  gzclose(out);
}

std::string error_of(const std::string& path) {
  return test::user_error_of([&] { read_idx(path); });
}

IdxArray two_images() { return {{2, 2, 3}, {0, 1, 2, 3, 4, 5, 250, 251, 252, 253, 254, 255}}; }

TEST(IdxFile, PlainAndGzipReadBackTheSameArray) {
  const auto plain = scratch("images.idx"), packed = scratch("images.idx.gz");
  write_idx(plain.string(), two_images());
  // The layout itself: magic 00 00 08 03, then 2, 2, 3 as big-endian int32, then the bytes.
  const auto bytes = bytes_of(plain);
  ASSERT_EQ(bytes.size(), 4u + 12u + 12u);
  EXPECT_EQ((std::vector<uint8_t>(bytes.begin(), bytes.begin() + 8)), (std::vector<uint8_t>{0, 0, 8, 3, 0, 0, 0, 2}));
  gzip(plain, packed);
  for (const auto& path : {plain, packed}) {
    const IdxArray read = read_idx(path.string());
    EXPECT_EQ(read.dims, two_images().dims) << path;
    EXPECT_EQ(read.values, two_images().values) << path;
  }
}

TEST(IdxFile, BadFilesAreOneLineNamingTheFault) {
  const auto good = scratch("good.idx");
  write_idx(good.string(), two_images());
  const auto bytes = bytes_of(good);
  const auto variant = [&](const std::string& name, std::vector<uint8_t> content) {
    write_bytes(scratch(name), content);
    return error_of(scratch(name).string());
  };
  EXPECT_NE(error_of(scratch("absent.idx").string()).find("not found"), std::string::npos);
  EXPECT_NE(variant("cut.idx", {bytes.begin(), bytes.end() - 1}).find("truncated"), std::string::npos);
  auto longer = bytes;
  longer.push_back(7);
  EXPECT_NE(variant("long.idx", longer).find("trailing bytes"), std::string::npos);
  auto magic = bytes;
  magic[0] = 1;
  EXPECT_NE(variant("magic.idx", magic).find("wrong magic"), std::string::npos);
  auto type = bytes;
  type[2] = 0x0D;  // float
  EXPECT_NE(variant("float.idx", type).find("element type 0x0d"), std::string::npos);
  EXPECT_NE(variant("short.idx", {0, 0}).find("truncated header"), std::string::npos);
  // A gzip stream cut in the middle: zlib reports it.
  const auto packed = scratch("whole.idx.gz");
  gzip(good, packed);
  auto gz = bytes_of(packed);
  gz.resize(gz.size() / 2);
  const std::string cut_gz = variant("cut.idx.gz", gz);
  EXPECT_TRUE(cut_gz.find("corrupt gzip") != std::string::npos || cut_gz.find("truncated") != std::string::npos) << cut_gz;
}

TEST(IdxFile, LabelsMustMatchImagesAndClasses) {
  const auto images = scratch("i.idx"), labels = scratch("l.idx");
  write_idx(images.string(), two_images());
  write_idx(labels.string(), {{2}, {1, 9}});
  const LabelledImages read = read_labelled_images(images.string(), labels.string(), 10);
  EXPECT_EQ(read.count, 2);
  EXPECT_EQ(read.height, 2);
  EXPECT_EQ(read.width, 3);
  EXPECT_EQ(read.labels, (std::vector<uint8_t>{1, 9}));
  const auto refused = [&](const IdxArray& l, int classes) {
    write_idx(labels.string(), l);
    try {
      read_labelled_images(images.string(), labels.string(), classes);
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(refused({{3}, {1, 2, 3}}, 10).find("holds 2 images but"), std::string::npos);
  EXPECT_NE(refused({{2}, {1, 9}}, 9).find("label 9 of item 1 is outside the 9 classes"), std::string::npos);
}

// Debian's files (scripts/setup installs dataset-fashion-mnist): 60,000 + 10,000 images of 28x28,
// exactly 6,000 and 1,000 of each of the 10 classes.
TEST(FashionMnist, DebianFilesHoldTheBalancedSplits) {
  if (!fs::is_directory(kFashionMnistDir)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const FashionMnist data = load_fashion_mnist();
  EXPECT_EQ(data.train.count, 60000);
  EXPECT_EQ(data.test.count, 10000);
  for (const auto* split : {&data.train, &data.test}) {
    EXPECT_EQ(split->height, 28);
    EXPECT_EQ(split->width, 28);
    std::array<int64_t, 10> per_class{};
    for (uint8_t label : split->labels) ++per_class[label];
    for (int64_t n : per_class) EXPECT_EQ(n, split->count / 10);
  }
}

TEST(FashionMnist, MissingDirectoryNamesThePackage) {
  try {
    load_fashion_mnist("/nonexistent/fashion");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("dataset-fashion-mnist"), std::string::npos);
  }
}

}  // namespace
}  // namespace pipetrain
