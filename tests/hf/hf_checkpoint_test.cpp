// Hugging Face checkpoint folders: one file or shards with their index, read tensor by tensor.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "hf/hf_checkpoint.h"
#include "../file_test_helpers.h"

namespace pipetrain::hf {
namespace {

std::vector<TensorEntry> three_tensors() {
  return {{"a.weight", "F32", {2, 3}, std::string(24, 'a')},
          {"b.weight", "F64", {4}, std::string(32, 'b')},
          {"c.bias", "BF16", {5}, std::string(10, 'c')}};
}

TEST(HfCheckpoint, TensorsThatFitAreOneFileAndReadBackByName) {
  const auto dir = test::fresh_folder("pipetrain_hf_single");
  EXPECT_EQ(write_checkpoint(dir.string(), three_tensors(), 1000), std::vector<std::string>{"model.safetensors"});
  const CheckpointReader reader(dir.string());
  const auto read = reader.read({"c.bias", "a.weight"});
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read[0].name, "a.weight");  // in the file's order
  EXPECT_EQ(read[0].bytes, std::string(24, 'a'));
  EXPECT_EQ(read[1].shape, std::vector<int64_t>{5});
  EXPECT_NE(test::user_error_of([&] { reader.read({"d"}); }).find("has no tensor 'd'"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(HfCheckpoint, LargerTensorsAreShardedWithAnIndexAndEachReadFromItsShard) {
  const auto dir = test::fresh_folder("pipetrain_hf_shards");
  const auto files = write_checkpoint(dir.string(), three_tensors(), 45);
  ASSERT_EQ(files.size(), 3u);  // two shards (24 bytes | 32 + 10: 24 + 32 exceed 45) and the index
  EXPECT_EQ(files[0], "model-00001-of-00002.safetensors");
  EXPECT_EQ(files[2], "model.safetensors.index.json");
  const CheckpointReader reader(dir.string());
  EXPECT_TRUE(reader.has("b.weight"));
  const auto read = reader.read({"b.weight", "c.bias"});
  ASSERT_EQ(read.size(), 2u);
  for (const auto& tensor : read) {
    EXPECT_EQ(tensor.bytes, tensor.name == "b.weight" ? std::string(32, 'b') : std::string(10, 'c'));
  }
  std::filesystem::remove(dir / files[1]);
  EXPECT_NE(test::user_error_of([&] { CheckpointReader again(dir.string()); }).find("which is missing"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(HfCheckpoint, AFolderWithoutWeightsIsRefused) {
  const auto dir = test::fresh_folder("pipetrain_hf_empty");
  EXPECT_NE(test::user_error_of([&] { CheckpointReader reader(dir.string()); }).find("holds neither"),
            std::string::npos);
  std::ofstream(dir / "model.safetensors.index.json") << R"({"weight_map": {"a": "../x.safetensors"}})";
  EXPECT_NE(test::user_error_of([&] { CheckpointReader reader(dir.string()); }).find("not a file name"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain::hf
