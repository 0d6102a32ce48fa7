// libFuzzer target: the checkpoint readers (safetensors decoder, checkpoint.json sidecar).
// The first byte picks the reader, so one corpus covers both.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] & 1) {
      (void)pipetrain::parse_checkpoint_info(text, "checkpoint.json");
    } else {
      std::map<std::string, std::string> metadata;
      const auto tensors = pipetrain::decode_safetensors(text, "fuzz.safetensors", &metadata);
      (void)pipetrain::encode_safetensors(tensors, metadata);  // what decodes re-encodes
    }
  } catch (const pipetrain::UserError&) {
  }
  return 0;
}
