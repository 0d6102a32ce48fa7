#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "../file_test_helpers.h"

namespace pipetrain {
namespace {

TEST(Text, StrictNumberParsing) {
  EXPECT_EQ(parse_int("42"), 42);
  EXPECT_EQ(parse_int("-7"), -7);
  EXPECT_FALSE(parse_int("4x"));
  EXPECT_FALSE(parse_int(""));
  EXPECT_FALSE(parse_int("99999999999999999999"));
  EXPECT_DOUBLE_EQ(*parse_double("1e-3"), 1e-3);
  EXPECT_FALSE(parse_double("nan"));
  EXPECT_FALSE(parse_double("1.0.0"));
}

// strtod/strtoll alone take hex, inf, a '+' and leading blanks.
TEST(Text, NumbersArePlainDecimals) {
  for (const char* text : {"0x10", "0X1p3", "inf", "-infinity", "nan", "+4", " 1", "1 ", "1e", ".", "-", "e5", "1e+"}) {
    EXPECT_FALSE(parse_double(text)) << text;
  }
  for (const char* text : {"0x4", "+4", " 4", "4.0", "1e3"}) EXPECT_FALSE(parse_int(text)) << text;
  EXPECT_DOUBLE_EQ(*parse_double(".5"), 0.5);
  EXPECT_DOUBLE_EQ(*parse_double("5."), 5.0);
  EXPECT_DOUBLE_EQ(*parse_double("-2.5E+2"), -250.0);
  EXPECT_EQ(parse_int("-0"), 0);
}

// The memory check's messages name sizes far beyond a machine's (docs/reliability.md).
TEST(Text, ByteSizesUpToYobibytes) {
  EXPECT_EQ(format_bytes(768.0 * double(uint64_t(1) << 60)), "768.0 EiB");
  EXPECT_EQ(format_bytes(13.1 * double(uint64_t(1) << 50)), "13.1 PiB");
}

TEST(Text, Formatting) {
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_count(12345), "12.3k");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024), "3.0 MiB");
  EXPECT_EQ(format_toml_double(3), "3.0");
  EXPECT_EQ(format_toml_double(0.0003), "0.0003");
  EXPECT_EQ(toml_quote("a\"b\\"), "\"a\\\"b\\\\\"");
}

TEST(Text, ClosestMatchOnlyForTypos) {
  EXPECT_EQ(closest_match("model.layer", {"model.layers", "train.lr"}), "model.layers");
  EXPECT_EQ(closest_match("zzzzzz", {"model.layers", "train.lr"}), "");
}

TEST(Files, AtomicWriteReplacesWholeFile) {
  const auto dir = test::fresh_folder("pipetrain_files_test");
  const std::string path = (dir / "a.txt").string();
  write_file_atomically(path, "first version, long");
  write_file_atomically(path, "second");
  EXPECT_EQ(read_file(path), "second");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename(), "a.txt") << "temporary file left behind";
  }
  std::filesystem::remove_all(dir);
}

TEST(Files, RunFolderIsNeverReusedSilently) {
  const auto dir = test::fresh_folder("pipetrain_run_dir_test");
  prepare_run_dir(dir.string(), false);
  write_file_atomically((dir / "metrics.jsonl").string(), "{}\n");
  EXPECT_THROW(prepare_run_dir(dir.string(), false), UserError);
  // --overwrite lets the run in; the earlier run's files go later (io/run_folder), not here,
  // and the write probe leaves nothing behind.
  prepare_run_dir(dir.string(), true);
  EXPECT_TRUE(std::filesystem::exists(dir / "metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir / ".write-test"));
  std::filesystem::remove_all(dir);
}

TEST(Files, UnwritableFolderIsAUserError) {
  EXPECT_THROW(prepare_run_dir("/proc/pipetrain-cannot-exist", false), UserError);
  EXPECT_THROW(read_file("/nonexistent/file"), UserError);
}

}  // namespace
}  // namespace pipetrain
