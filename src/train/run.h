#pragma once
// A whole training run: data, trainer, progress line, metrics.jsonl, validation, loss plot,
// config dump, checkpoint and a text sample, all in one run folder. Free of libtorch headers so
// the CLI compiles fast.
#include <string>

#include "core/config.h"
#include "train/step_result.h"

namespace pipetrain {

struct RunOptions {
  std::string run_dir;         // created if missing
  bool overwrite = false;      // allow a folder that already holds a run
  std::string data_root;       // fallback folder for relative data paths
  bool progress = true;        // live progress line on stderr
  bool resume = false;         // continue run_dir from its latest checkpoint
};

struct RunSummary {
  int64_t steps = 0;
  double final_loss = 0;
  double final_val_loss = 0;
  Measures final_val_measures;  // the model's own (accuracy), from the last validation
  double tokens_per_s = 0;                 // (metrics.jsonl's name) of throughput_unit
  std::string throughput_unit = "tokens";  // "tokens", "images", "utterances"
  double seconds = 0;
  std::string sample;
  bool reported_here = true;  // false: the reporting worker ran on another node
  std::string memory;  // pipeline runs: one line per worker, peak bytes by kind (may be empty)
};


RunSummary run_training(const Config& config, const RunOptions& options);

// Threads for libtorch/OpenBLAS: `requested`, or one per core when 0. Returns the count used.
int configure_compute_threads(int64_t requested);

}  // namespace pipetrain
