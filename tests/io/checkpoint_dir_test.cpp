// The checkpoint folder protocol: complete folders only, `latest` written last, old ones pruned,
// a crash's .partial folder never read; the sidecar round-trips and damage is a UserError.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "io/checkpoint_dir.h"
#include "io/crc32c.h"
#include "io/run_folder.h"

#include <nlohmann/json.hpp>

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

CheckpointInfo sample_info(int64_t step) {
  CheckpointInfo info;
  info.step = step;
  info.data_position = step;
  info.schedule = "1f1b";
  info.stages = 2;
  info.partition = {{0, 3}, {3, 6}};
  info.optimizer = "adamw";
  info.layers = 6;
  info.model_shape = {4, 128, 4, 128, 256};
  info.config_toml = "[train]\nsteps = 10\n";
  info.config_hash = config_hash(info.config_toml);
  info.rng_state = "00ff";
  info.weight_versions = {{"stage0.safetensors"}, {"stage1.safetensors"}};
  info.optimizer_files = {"stage0.optimizer.safetensors", "stage1.optimizer.safetensors"};
  for (const auto* file : {"stage0.safetensors", "stage1.safetensors", "stage0.optimizer.safetensors",
                           "stage1.optimizer.safetensors"}) {
    info.crc32c[file] = "0123abcd";
  }
  return info;
}

fs::path scratch() {
  const auto dir = fs::temp_directory_path() / ("pipetrain_ckdir_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(CheckpointDir, SidecarRoundTrips) {
  const auto info = sample_info(200);
  const auto back = parse_checkpoint_info(checkpoint_info_json(info), "x");
  EXPECT_EQ(back.step, 200);
  EXPECT_EQ(back.partition, info.partition);
  EXPECT_EQ(back.weight_versions, info.weight_versions);
  EXPECT_EQ(back.optimizer_files, info.optimizer_files);
  EXPECT_EQ(back.model_shape, info.model_shape);
  EXPECT_EQ(back.config_hash, info.config_hash);
  EXPECT_EQ(back.rng_state, "00ff");
  EXPECT_EQ(back.policy, "sync");
  EXPECT_EQ(back.crc32c, info.crc32c);
}

// Format 3 records a CRC32C for every listed file; a sidecar of format 2 (written before
// checksums) is still read, with no checksums to verify.
TEST(CheckpointDir, EveryListedFileHasAChecksumExceptInFormatTwo) {
  auto unlisted = sample_info(2);
  unlisted.crc32c.erase("stage1.optimizer.safetensors");
  EXPECT_THROW(parse_checkpoint_info(checkpoint_info_json(unlisted), "x"), UserError);
  auto malformed = sample_info(2);
  malformed.crc32c["stage0.safetensors"] = "xyz";
  EXPECT_THROW(parse_checkpoint_info(checkpoint_info_json(malformed), "x"), UserError);
  auto old = nlohmann::json::parse(checkpoint_info_json(sample_info(2)));
  old["format"] = "pipetrain-checkpoint-2";
  old.erase("crc32c");
  old.erase("checkpoint_json_crc32c");  // (format 2 had none)
  EXPECT_TRUE(parse_checkpoint_info(old.dump(), "x").crc32c.empty());
}

// The sidecar's own CRC32C: any field changed after writing (the step, the partition, the
// format) is refused; the same content in other JSON formatting is not a change; a sidecar
// written before the checksum (none recorded) loads unverified.
TEST(CheckpointDir, AnEditedSidecarIsRefusedByItsOwnChecksum) {
  const std::string text = checkpoint_info_json(sample_info(4));
  EXPECT_NE(text.find("\"checkpoint_json_crc32c\": \""), std::string::npos) << text;
  EXPECT_EQ(parse_checkpoint_info(nlohmann::json::parse(text).dump(), "x").step, 4);  // one line
  // Every field is covered, the optional ones too (float16's loss scale, the data).
  auto optional = sample_info(4);
  optional.loss_scale = optional.loss_scale_previous = 65536;
  optional.loss_scale_applied_steps = optional.loss_scale_good_steps = 4;
  optional.data_fingerprint = "9 bytes, crc32c e3069283";
  EXPECT_EQ(parse_checkpoint_info(checkpoint_info_json(optional), "x").loss_scale, 65536);
  std::string scale = checkpoint_info_json(optional);
  scale.replace(scale.find("\"loss_scale\": 65536.0"), 21, "\"loss_scale\": 32768.0");
  EXPECT_THROW(parse_checkpoint_info(scale, "x"), UserError);
  std::string edited = text;
  edited.replace(edited.find("\"step\": 4"), 9, "\"step\": 3");
  try {
    parse_checkpoint_info(edited, "x");
    FAIL() << "an edited step was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              "x: checkpoint.json changed after it was written (its own CRC32C does not match: "
              "damaged or edited); a checkpoint resumes only as written");
  }
  auto partition = nlohmann::json::parse(text);
  partition["partition"] = {{0, 2}, {2, 6}};
  EXPECT_THROW(parse_checkpoint_info(partition.dump(), "x"), UserError);
  partition.erase("checkpoint_json_crc32c");
  EXPECT_EQ(parse_checkpoint_info(partition.dump(), "x").partition.at(0).second, 2);
}

// A file whose bytes differ from its recorded CRC32C is refused naming it; without checksums
// (format 2) only its structure is checked.
TEST(CheckpointDir, ReadingAFileVerifiesItsChecksum) {
  const auto dir = scratch();
  const std::string bytes = encode_safetensors({{"w", "F32", {1}, std::string(4, '\x01')}});
  write_file_atomically((dir / "stage0.safetensors").string(), bytes);
  auto info = sample_info(2);
  info.crc32c["stage0.safetensors"] = crc32c_hex(bytes);
  EXPECT_EQ(read_checkpoint_file(dir.string(), "stage0.safetensors", info).at(0).name, "w");
  std::string flipped = bytes;
  flipped.back() ^= 0x40;
  write_file_atomically((dir / "stage0.safetensors").string(), flipped);
  try {
    read_checkpoint_file(dir.string(), "stage0.safetensors", info);
    FAIL() << "a flipped bit was accepted";
  } catch (const UserError& error) {
    EXPECT_EQ(std::string(error.what()),
              (dir / "stage0.safetensors").string() + ": damaged: its CRC32C is " +
                  crc32c_hex(flipped) + ", checkpoint.json recorded " + crc32c_hex(bytes));
  }
  info.crc32c.clear();
  EXPECT_EQ(read_checkpoint_file(dir.string(), "stage0.safetensors", info).size(), 1u);
  EXPECT_THROW(read_checkpoint_file(dir.string(), "stage1.safetensors", info), UserError);  // missing
  fs::remove_all(dir);
}

TEST(CheckpointDir, DamagedSidecarIsAUserErrorNamingTheFile) {
  const std::string good = checkpoint_info_json(sample_info(2));
  for (const std::string& bad : {std::string("{"), good.substr(0, good.size() / 2), std::string("[]"),
                                std::string("{\"format\": \"pipetrain-checkpoint-2\"}")}) {
    try {
      parse_checkpoint_info(bad, "run/ck.json");
      FAIL() << "accepted: " << bad;
    } catch (const UserError& error) {
      EXPECT_EQ(std::string(error.what()).rfind("run/ck.json: ", 0), 0u) << error.what();
    }
  }
  auto escaping = sample_info(2);
  escaping.weight_versions[0] = {"../../etc/passwd"};
  EXPECT_THROW(parse_checkpoint_info(checkpoint_info_json(escaping), "x"), UserError);
  auto inconsistent = sample_info(2);
  inconsistent.partition.pop_back();
  EXPECT_THROW(parse_checkpoint_info(checkpoint_info_json(inconsistent), "x"), UserError);
}

TEST(CheckpointDir, KeepsTheNewestCompleteFoldersAndLatestNamesTheLast) {
  const auto run = scratch();
  EXPECT_EQ(latest_checkpoint_or_empty(run.string()), "");
  EXPECT_THROW(latest_checkpoint(run.string()), UserError);
  for (int64_t step : {2, 4, 6}) {
    const auto partial = begin_checkpoint(run.string(), step);
    write_file_atomically(partial + "/stage0.safetensors", "w");
    commit_checkpoint(run.string(), sample_info(step), /*keep=*/2);
  }
  const auto root = run / "checkpoints";
  EXPECT_FALSE(fs::exists(root / "step-000002"));
  EXPECT_TRUE(fs::exists(root / "step-000004" / "checkpoint.json"));
  EXPECT_TRUE(fs::exists(root / "step-000006" / "stage0.safetensors"));
  EXPECT_EQ(read_file((root / "latest").string()), "step-000006\n");
  EXPECT_EQ(latest_checkpoint(run.string()), (root / "step-000006").string());

  // A crash while writing step 8: the partial folder is never what `latest` names.
  const auto partial = begin_checkpoint(run.string(), 8);
  write_file_atomically(partial + "/stage0.safetensors", "half");
  EXPECT_EQ(latest_checkpoint(run.string()), (root / "step-000006").string());
  // The next attempt at step 8 starts from an empty folder.
  EXPECT_TRUE(fs::is_empty(begin_checkpoint(run.string(), 8)));
  fs::remove_all(run);
}

// Past six digits of step the folders are pruned by their steps, not their names (by name,
// step-1000000 sorted before step-999000: the newest but one went, the oldest stayed).
TEST(CheckpointDir, KeepsTheNewestByStepPastSixDigits) {
  const auto run = scratch();
  for (int64_t step : {999000, 1000000, 1001000}) {
    begin_checkpoint(run.string(), step);
    commit_checkpoint(run.string(), sample_info(step), /*keep=*/2);
  }
  const auto root = run / "checkpoints";
  EXPECT_FALSE(fs::exists(root / "step-999000"));
  EXPECT_TRUE(fs::exists(root / "step-1000000" / "checkpoint.json"));
  EXPECT_TRUE(fs::exists(root / "step-1001000" / "checkpoint.json"));
  EXPECT_EQ(latest_checkpoint(run.string()), (root / "step-1001000").string());
  fs::remove_all(run);
}

// A step written again (a resumed run) replaces the earlier folder whole and leaves neither
// it nor a partial folder behind.
TEST(CheckpointDir, TheSameStepAgainReplacesTheFolderWhole) {
  const auto run = scratch();
  for (const std::string bytes : {"first", "second"}) {
    const auto partial = begin_checkpoint(run.string(), 6);
    write_file_atomically(partial + "/stage0.safetensors", bytes);
    if (bytes == "first") write_file_atomically(partial + "/stage1.safetensors", bytes);
    commit_checkpoint(run.string(), sample_info(6), /*keep=*/2);
  }
  const auto root = run / "checkpoints";
  EXPECT_EQ(read_file((root / "step-000006" / "stage0.safetensors").string()), "second");
  EXPECT_FALSE(fs::exists(root / "step-000006" / "stage1.safetensors"));
  EXPECT_FALSE(fs::exists(root / "step-000006.partial"));
  EXPECT_FALSE(fs::exists(root / "step-000006.old"));
  EXPECT_EQ(latest_checkpoint(run.string()), (root / "step-000006").string());
  fs::remove_all(run);
}

void touch(const fs::path& path) {
  fs::create_directories(path.parent_path());
  write_file_atomically(path.string(), "x");
}

// --overwrite removes a previous run's outputs by their names only: the user's files in the
// run folder (or in checkpoints/) stay, and a folder that holds no run (no metrics.jsonl)
// loses nothing.
TEST(RunFolder, RemovingAPreviousRunKeepsWhatIsNotARunOutput) {
  const auto run = scratch();
  const std::vector<fs::path> outputs = {
      run / "metrics.jsonl", run / "loss.svg", run / "summary.json", run / "sample.txt",
      run / "trace.json", run / "timeline.svg", run / "trace-rank1.json", run / "workers.pid",
      run / "launch-node0.json",
      run / "checkpoints" / "latest", run / "checkpoints" / "step-000004" / "model.safetensors",
      run / "checkpoints" / "step-000006.partial" / "stage0.safetensors",
      run / "checkpoint" / "stage1.version3.safetensors", run / "checkpoint" / "checkpoint.json",
      run / "checkpoint" / "model.safetensors.tmp.77", run / "summary.json.tmp.12"};
  const std::vector<fs::path> kept = {run / "config.toml", run / "notes.txt",
                                      run / "checkpoints" / "mine.bin", run / "checkpoint.json",
                                      run / "checkpoint" / "notes.safetensors", run / "metrics.jsonl.bak"};
  for (const auto& path : outputs) touch(path);
  for (const auto& path : kept) touch(path);
  remove_previous_run(run.string());
  for (const auto& path : outputs) EXPECT_FALSE(fs::exists(path)) << path;
  for (const auto& path : kept) EXPECT_TRUE(fs::exists(path)) << path;
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "step-000004"));
  EXPECT_TRUE(fs::exists(run / "checkpoint"));  // it still holds the user's file

  const auto not_a_run = scratch();
  touch(not_a_run / "checkpoints" / "step-000002" / "model.safetensors");
  remove_previous_run(not_a_run.string());
  EXPECT_TRUE(fs::exists(not_a_run / "checkpoints" / "step-000002" / "model.safetensors"));
  fs::remove_all(run);
  fs::remove_all(not_a_run);
}

// What a kill -9 leaves mid-write goes; complete checkpoints and everything else stay.
TEST(RunFolder, InterruptedWritesAreRemovedByTheirNamesOnly) {
  const auto run = scratch();
  const std::vector<fs::path> leftovers = {
      run / "checkpoints" / "step-000008.partial" / "stage0.safetensors",
      run / "checkpoints" / "step-000006.old" / "checkpoint.json", run / "checkpoints" / "latest.tmp.4242",
      run / "checkpoint" / "optimizer.safetensors.tmp.4242", run / "config.toml.tmp.9",
      run / "trace-rank0.json.tmp.3"};
  const std::vector<fs::path> kept = {
      run / "metrics.jsonl", run / "checkpoints" / "latest", run / "checkpoints" / "step-000006" / "checkpoint.json",
      run / "checkpoint" / "model.safetensors", run / "checkpoint" / "mine.tmp.4242", run / "notes.tmp.1",
      run / "checkpoints" / "step-000006.backup"};
  for (const auto& path : leftovers) touch(path);
  for (const auto& path : kept) touch(path);
  remove_interrupted_writes(run.string());
  for (const auto& path : leftovers) EXPECT_FALSE(fs::exists(path)) << path;
  EXPECT_FALSE(fs::exists(run / "checkpoints" / "step-000008.partial"));
  for (const auto& path : kept) EXPECT_TRUE(fs::exists(path)) << path;
  fs::remove_all(run);
}

// FNV-1a 64 (values from an independent implementation): the same text hashes alike in every
// build and process. (Its offset basis had lost a digit, 1469598103934665603: a stable hash, but
// not the FNV-1a checkpoint.json said it was; nothing compares the recorded hashes.)
TEST(CheckpointDir, ConfigHashIsStableAndSensitive) {
  EXPECT_EQ(config_hash(""), "cbf29ce484222325");  // the offset basis
  EXPECT_EQ(config_hash("a"), "af63dc4c8601ec8c");
  EXPECT_EQ(config_hash("[model]\nlayers = 2\n"), "e73bba0dc34e9987");
  EXPECT_NE(config_hash("a"), config_hash("b"));
  EXPECT_EQ(step_dir_name(200), "step-000200");
}

}  // namespace
}  // namespace pipetrain
