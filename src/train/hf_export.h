#pragma once
// `pipetrain export --format hf`: a run's checkpoint as a Hugging Face checkpoint folder
// (config.json + model.safetensors, sharded above a size) that transformers' from_pretrained
// loads. Free of libtorch headers so the CLI compiles fast.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace pipetrain {

struct HfExportOptions {
  std::string checkpoint_dir;  // the checkpoint folder to read
  std::string out_dir;         // created; must not hold files yet
  std::string dtype;           // float32 | float64 | bfloat16 | float16; "" = the weights' own
  uint64_t shard_bytes = uint64_t(5) << 30;  // transformers' default max_shard_size, 5 GB
  // The Hugging Face checkpoint the run started from (its config.toml's model.init_from, which
  // the export's config clears: the weights are the run's): its special-token ids go along, and
  // its tokenizer and generation files (hf::companion_files) are copied beside the weights.
  std::string started_from;
};

// The files written into out_dir (config.json first). UserError for a model kind without a
// Hugging Face form, an out_dir holding files, or a checkpoint that does not fit `config`.
std::vector<std::string> export_hf(const Config& config, const HfExportOptions& options);

}  // namespace pipetrain
