#pragma once
// Safetensors files written and read straight to and from disk, one tensor's bytes at a time:
// a checkpoint holds no copy of its file in memory (a worker at its memory budget would exceed
// it by the file's size). The bytes written are exactly encode_safetensors' of the same tensors
// (one header builder), written atomically (core/atomic_file.h) with their CRC32C computed on
// the way; reading checks what decode_safetensors checks (the same parser).
//
//   SafetensorsFileWriter out(path, layouts);
//   for (each tensor, in the order of `layouts`) out.write_tensor(its bytes);
//   const std::string crc = out.commit();
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.h"
#include "io/safetensors.h"

namespace pipetrain {

class SafetensorsFileWriter {
 public:
  // Creates the temporary file and writes the header; UserError naming `path` on failure.
  SafetensorsFileWriter(const std::string& path, std::vector<TensorLayout> tensors,
                        const std::map<std::string, std::string>& metadata = {});

  // The next tensor's bytes; their size must be what its layout needs.
  void write_tensor(std::string_view bytes);
  // Renames the finished file onto `path` and returns its CRC32C (8 hex digits). Without a
  // commit (an error on the way) nothing is left under `path`.
  std::string commit();

 private:
  void write(std::string_view bytes);

  AtomicFile file_;
  std::vector<TensorLayout> tensors_;
  size_t written_tensors_ = 0;
  uint32_t crc_ = 0;
};

// The tensors of the file at `path`, each read into its entry, in the header's order (as
// decode_safetensors(read_file(path), path) returns them, without the whole file in memory).
// `crc` (if given) receives the CRC32C of every byte of the file. UserError naming `path` if it
// cannot be read or is malformed.
std::vector<TensorEntry> read_safetensors_file(const std::string& path, uint32_t* crc = nullptr,
                                               std::map<std::string, std::string>* metadata = nullptr);

// The tensors of the file at `path` without their bytes (the header only), in the header's order.
std::vector<TensorLayout> read_safetensors_layout(const std::string& path);
// The tensors named in `names` (each must be in the file: UserError otherwise), each read from
// its own place; the file's other tensors are not read (a pipeline worker loading its layers of
// a large checkpoint). In the header's order; no checksum.
std::vector<TensorEntry> read_safetensors_tensors(const std::string& path,
                                                  const std::vector<std::string>& names);

}  // namespace pipetrain
