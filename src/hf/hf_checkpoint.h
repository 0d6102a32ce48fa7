#pragma once
// A Hugging Face checkpoint folder's weights: model.safetensors, or shards named by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {tensor: shard file}}).
// Reading takes only the tensors asked for, each from its shard; writing shards above a size.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace pipetrain::hf {

class CheckpointReader {
 public:
  // UserError naming `dir` when it holds neither weight file, or an index naming a missing shard.
  explicit CheckpointReader(std::string dir);
  bool has(const std::string& name) const { return shard_of_.count(name) != 0; }
  const std::string& dir() const { return dir_; }
  // The tensors named (UserError for one the checkpoint lacks), reading no other tensor's bytes.
  std::vector<TensorEntry> read(const std::vector<std::string>& names) const;

 private:
  std::string dir_;
  std::map<std::string, std::string> shard_of_;  // tensor name -> its file's path
};

// Writes `tensors` into `dir` (which must exist): one model.safetensors when they fit in
// `shard_bytes`, otherwise model-0000i-of-0000n.safetensors and model.safetensors.index.json.
// Each file atomically (core/atomic_file.h). Returns the files written.
std::vector<std::string> write_checkpoint(const std::string& dir, const std::vector<TensorEntry>& tensors,
                                          uint64_t shard_bytes);

}  // namespace pipetrain::hf
