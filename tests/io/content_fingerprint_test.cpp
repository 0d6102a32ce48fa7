// The data fingerprint a checkpoint records: a file's size and CRC32C (against the published
// check value, and across the 4 MiB reads), a folder's regular files with their names in order,
// and data paths found below the fallback root as the data readers find them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "core/files.h"
#include "io/content_fingerprint.h"
#include "io/crc32c.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

fs::path fresh_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("pipetrain_fingerprint_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(ContentFingerprint, AFileIsItsSizeAndChecksum) {
  const fs::path dir = fresh_folder("file");
  write_file_atomically((dir / "check").string(), "123456789");
  EXPECT_EQ(content_fingerprint((dir / "check").string()), "9 bytes, crc32c e3069283");
  std::string large(size_t(9) << 20, '\0');  // beyond one read
  for (size_t i = 0; i < large.size(); ++i) large[i] = char(i * 2654435761u >> 13);
  write_file_atomically((dir / "large").string(), large);
  EXPECT_EQ(content_fingerprint((dir / "large").string()),
            std::to_string(large.size()) + " bytes, crc32c " + crc32c_hex(large));
  large[large.size() / 2] ^= 1;
  write_file_atomically((dir / "large").string(), large);
  EXPECT_EQ(content_fingerprint((dir / "large").string()),
            std::to_string(large.size()) + " bytes, crc32c " + crc32c_hex(large));
  EXPECT_EQ(content_fingerprint((dir / "missing").string()), "");
  fs::remove_all(dir);
}

TEST(ContentFingerprint, AFolderIsItsFilesInNameOrderWithTheirNames) {
  const fs::path dir = fresh_folder("folder");
  write_file_atomically((dir / "val.bin").string(), "vv");
  write_file_atomically((dir / "train.bin").string(), "ttt");
  fs::create_directories(dir / "sub");  // not read
  write_file_atomically((dir / "sub" / "x").string(), "x");
  const std::string expected = "2 files, 5 bytes, crc32c " + crc32c_hex(std::string("train.bin\0ttt", 13) +
                                                                        std::string("val.bin\0vv", 10));
  EXPECT_EQ(content_fingerprint(dir.string()), expected);
  fs::rename(dir / "val.bin", dir / "valid.bin");  // the same bytes under another name
  EXPECT_NE(content_fingerprint(dir.string()), expected);
  fs::remove_all(dir);
}

TEST(ContentFingerprint, DataPathsAreFoundAsGivenElseBelowTheRoot) {
  const fs::path root = fresh_folder("root");
  fs::create_directories(root / "data");
  write_file_atomically((root / "data" / "text").string(), "123456789");
  EXPECT_EQ(data_fingerprint("data/text", root.string()), "9 bytes, crc32c e3069283");
  EXPECT_EQ(data_fingerprint((root / "data" / "text").string(), "/nonexistent"), "9 bytes, crc32c e3069283");
  EXPECT_EQ(data_fingerprint("data/none", root.string()), "");
  fs::remove_all(root);
}

}  // namespace
}  // namespace pipetrain
