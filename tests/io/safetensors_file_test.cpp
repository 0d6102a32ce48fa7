// The streaming safetensors writer: the very bytes encode_safetensors makes, the CRC32C of the
// file, and nothing under the final name when a write goes wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "../file_test_helpers.h"
#include "core/files.h"
#include "io/crc32c.h"
#include "io/safetensors_file.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

using test::fresh_folder;
using test::files_in;

// Tensors whose header needs padding, listed out of name order, of several dtypes and an
// empty one, with distinct bytes (a byte out of place changes the file).
std::vector<TensorEntry> mixed_entries() {
  const auto bytes = [](size_t count, int seed) {
    std::string out(count, '\0');
    for (size_t i = 0; i < count; ++i) out[i] = char((i * 131 + size_t(seed) * 17) % 251);
    return out;
  };
  return {{"layer1.weight", "F32", {3, 5}, bytes(60, 1)},
          {"layer0.bias", "F64", {7}, bytes(56, 2)},
          {"layer0.weight.step", "I64", {}, bytes(8, 3)},
          {"empty", "F32", {0, 4}, ""},
          {"z.mask", "U8", {3}, bytes(3, 4)}};
}

std::vector<TensorLayout> layouts_of(const std::vector<TensorEntry>& entries) {
  std::vector<TensorLayout> layouts;
  for (const auto& entry : entries) layouts.push_back({entry.name, entry.dtype, entry.shape});
  return layouts;
}

using test::user_error_of;

TEST(SafetensorsFileWriter, WritesTheEncodersBytesAndTheirCrc32c) {
  const fs::path dir = fresh_folder("pipetrain_safetensors_stream");
  const std::string path = (dir / "weights.safetensors").string();
  const auto entries = mixed_entries();
  const std::map<std::string, std::string> metadata = {{"step", "12"}};
  SafetensorsFileWriter out(path, layouts_of(entries), metadata);
  for (const auto& entry : entries) out.write_tensor(entry.bytes);
  const std::string crc = out.commit();
  const std::string file = read_file(path);
  const std::string expected = encode_safetensors(entries, metadata);
  const size_t data_bytes = 60 + 56 + 8 + 0 + 3;
  EXPECT_EQ(file.size(), safetensors_header(layouts_of(entries), metadata).size() + data_bytes);
  EXPECT_EQ(file, expected);
  EXPECT_EQ(crc, crc32c_hex(expected));
  EXPECT_EQ(files_in(dir), 1u);  // no temporary left
  fs::remove_all(dir);
}

TEST(SafetensorsFileWriter, WrongSizedTensorIsAUserErrorAndLeavesNoFile) {
  const fs::path dir = fresh_folder("pipetrain_safetensors_wrong_size");
  const std::string path = (dir / "weights.safetensors").string();
  const auto entries = mixed_entries();
  const std::string message = user_error_of([&] {
    SafetensorsFileWriter out(path, layouts_of(entries));
    out.write_tensor(entries[0].bytes);
    out.write_tensor(entries[1].bytes + "x");
  });
  EXPECT_EQ(message, "cannot write '" + path + "': tensor 'layer0.bias' has 57 bytes, its shape needs 56");
  EXPECT_EQ(files_in(dir), 0u);
  fs::remove_all(dir);
}

TEST(SafetensorsFileWriter, CommitBeforeEveryTensorIsAUserErrorAndLeavesTheOldFile) {
  const fs::path dir = fresh_folder("pipetrain_safetensors_short");
  const std::string path = (dir / "weights.safetensors").string();
  write_file_atomically(path, "previous checkpoint");
  const auto entries = mixed_entries();
  const std::string message = user_error_of([&] {
    SafetensorsFileWriter out(path, layouts_of(entries));
    for (size_t i = 0; i + 1 < entries.size(); ++i) out.write_tensor(entries[i].bytes);
    out.commit();
  });
  EXPECT_EQ(message, "cannot write '" + path + "': 4 of its 5 tensors written");
  EXPECT_EQ(read_file(path), "previous checkpoint");
  EXPECT_EQ(files_in(dir), 1u);
  fs::remove_all(dir);
}

void expect_same_entries(const std::vector<TensorEntry>& got, const std::vector<TensorEntry>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_EQ(got[i].dtype, want[i].dtype) << want[i].name;
    EXPECT_EQ(got[i].shape, want[i].shape) << want[i].name;
    EXPECT_EQ(got[i].bytes, want[i].bytes) << want[i].name;
  }
}

TEST(SafetensorsFileReader, ReadsWhatDecodeReadsAndTheFilesCrc32c) {
  const fs::path dir = fresh_folder("pipetrain_safetensors_read");
  const std::string path = (dir / "weights.safetensors").string();
  const std::string file = encode_safetensors(mixed_entries(), {{"step", "12"}});
  write_file_atomically(path, file);
  uint32_t crc = 0;
  std::map<std::string, std::string> metadata;
  expect_same_entries(read_safetensors_file(path, &crc, &metadata), decode_safetensors(file, path));
  EXPECT_EQ(metadata, (std::map<std::string, std::string>{{"step", "12"}}));
  EXPECT_EQ(crc, crc32c(file));
  fs::remove_all(dir);
}

// Bytes no tensor holds (a gap, a tail) and data out of the header's order: the entries are
// the decoder's, the checksum covers every byte.
TEST(SafetensorsFileReader, GapsTailsAndUnorderedDataCountInTheCrc32c) {
  const fs::path dir = fresh_folder("pipetrain_safetensors_gaps");
  const std::string path = (dir / "gaps.safetensors").string();
  const std::string header =
      R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[7,9]},"b":{"dtype":"U8","shape":[3],"data_offsets":[1,4]}})";
  std::string file(8, '\0');
  file[0] = char(header.size());
  file += header + "gBBBgggAAtail";
  write_file_atomically(path, file);
  uint32_t crc = 0;
  const auto entries = read_safetensors_file(path, &crc);
  expect_same_entries(entries, decode_safetensors(file, path));
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].bytes, "AA");
  EXPECT_EQ(entries[1].bytes, "BBB");
  EXPECT_EQ(crc, crc32c(file));
  fs::remove_all(dir);
}

// Damage is refused with the decoder's message, naming the file.
TEST(SafetensorsFileReader, DamagedFilesGiveTheDecodersMessages) {
  const fs::path dir = fresh_folder("pipetrain_safetensors_damaged");
  const std::string path = (dir / "damaged.safetensors").string();
  const std::string good = encode_safetensors(mixed_entries());
  std::string bad_json = good;
  bad_json[8] = '#';
  for (const std::string& damaged : {good.substr(0, 5), good.substr(0, 40), good.substr(0, good.size() - 1), bad_json}) {
    write_file_atomically(path, damaged);
    const std::string want = user_error_of([&] { decode_safetensors(damaged, path); });
    ASSERT_NE(want, "");
    EXPECT_EQ(user_error_of([&] { read_safetensors_file(path); }), want);
  }
  EXPECT_EQ(user_error_of([&] { read_safetensors_file((dir / "missing").string()); }),
            "cannot read '" + (dir / "missing").string() + "': No such file or directory");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
