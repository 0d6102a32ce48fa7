#pragma once
// The on-disk layout of periodic checkpoints, free of libtorch:
//
//   RUN_DIR/checkpoints/step-000200/   one complete checkpoint (weights, optimizer, checkpoint.json)
//   RUN_DIR/checkpoints/latest         "step-000200": the newest complete one, written last
//
// A checkpoint is written into step-000200.partial/, then checkpoint.json, fsync, rename to
// step-000200/, fsync of the folder, and only then `latest`. A crash at any point leaves the
// previous complete checkpoint and `latest` untouched; a .partial folder is never read.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace pipetrain {

// The JSON sidecar (checkpoint.json). Weight files are listed per stage as versions, newest
// first: synchronous policies hold one version, asynchronous ones (2BW: two) list each.
struct CheckpointInfo {
  int64_t step = 0;                 // optimizer steps done; training resumes at this step
  std::string schedule;             // pipeline.schedule ("single" for the single-process trainer)
  std::string policy = "sync";      // weight policy of the schedule
  int64_t stages = 1;
  std::vector<std::pair<int64_t, int64_t>> partition;  // per stage: layers [first, last)
  std::string optimizer;
  int64_t layers = 0;               // embedding + blocks + head
  std::vector<int64_t> model_shape; // layers, d_model, heads, seq_len, vocab_size
  std::string config_hash;          // FNV-1a of the run's config TOML
  std::string config_toml;
  // data.path's content_fingerprint (io/content_fingerprint.h) when the run started; "" in
  // checkpoints written before it was recorded, which resume unchecked.
  std::string data_fingerprint;
  std::string rng_state;            // hex of the torch CPU generator state
  int64_t data_position = 0;        // batches are a pure function of (seed, step): = step
  double val_loss = 0;
  // model.dtype float16: the dynamic loss scale and its good steps in a row, to resume with
  // (0: none; train/loss_scale.h).
  double loss_scale = 0;
  int64_t loss_scale_good_steps = 0;
  int64_t loss_scale_applied_steps = 0;  // 0: every step skipped, the optimizer files hold no state
  // The scale one update earlier, which a no-flush schedule's next step may still read (0: none
  // recorded, as before no-flush schedules ran float16: the scale itself).
  double loss_scale_previous = 0;
  std::vector<std::vector<std::string>> weight_versions;  // per stage: files, newest first
  std::vector<std::string> optimizer_files;
  // File -> CRC32C (8 hex digits) of every weight and optimizer file listed above. Empty only in
  // checkpoints written before checksums (format "pipetrain-checkpoint-2"), which load unverified.
  std::map<std::string, std::string> crc32c;
};

std::string checkpoint_info_json(const CheckpointInfo& info);
// Validates every field; UserError naming `origin` for anything missing or malformed.
CheckpointInfo parse_checkpoint_info(const std::string& text, const std::string& origin);

// The tensors of `file` (one listed in `info`) in checkpoint folder `dir`: UserError naming the
// file if it is missing, malformed, or its bytes do not match the CRC32C checkpoint.json records.
std::vector<TensorEntry> read_checkpoint_file(const std::string& dir, const std::string& file,
                                              const CheckpointInfo& info);

std::string config_hash(const std::string& text);  // 16 hex digits
std::string checkpoints_root(const std::string& run_dir);
std::string run_dir_of_checkpoint(const std::string& step_dir);  // RUN_DIR of RUN_DIR/checkpoints/step-N
std::string step_dir_name(int64_t step);  // "step-000200"

// Creates (empty) RUN_DIR/checkpoints/step-N.partial/ and returns its path.
std::string begin_checkpoint(const std::string& run_dir, int64_t step);
// Writes checkpoint.json, renames the partial folder to its final name, updates `latest`, and
// removes all but the newest `keep` complete checkpoints. Returns the final folder.
std::string commit_checkpoint(const std::string& run_dir, const CheckpointInfo& info, int64_t keep);

// The folder `latest` names, checked to exist; UserError if the run has no checkpoint.
std::string latest_checkpoint(const std::string& run_dir);
// The latest checkpoint's folder, or "" if none (for messages).
std::string latest_checkpoint_or_empty(const std::string& run_dir);

void fsync_directory(const std::string& dir);

}  // namespace pipetrain
