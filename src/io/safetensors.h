#pragma once
// The safetensors format (loadable from Python with `safetensors.torch.load_file`):
// 8-byte little-endian header length, a JSON header {name: {dtype, shape, data_offsets}},
// then the raw little-endian tensor bytes. Pure C++; torch glue lives with the model.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace pipetrain {

// A tensor's place in a safetensors file: everything but its bytes.
struct TensorLayout {
  std::string name;
  std::string dtype;  // "F32", "F64", "I64", ...
  std::vector<int64_t> shape;
};

struct TensorEntry {
  std::string name;
  std::string dtype;  // "F32", "F64", "I64", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw data, row-major
};

size_t dtype_size(const std::string& dtype);  // UserError for unknown dtypes
uint64_t tensor_byte_size(const TensorLayout& tensor);  // its elements x its dtype's size

// Everything before the tensor data: the 8-byte header length, then the JSON header (data
// offsets in the order of `tensors`) padded so the data is 8-byte aligned. The one header
// builder of both encode_safetensors and SafetensorsFileWriter (io/safetensors_file.h).
std::string safetensors_header(const std::vector<TensorLayout>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// The whole file in memory (small files, tests); checkpoints stream theirs to disk.

std::string encode_safetensors(const std::vector<TensorEntry>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// Validates everything (sizes, offsets, overlaps, dtypes); UserError naming `origin` on damage.
std::vector<TensorEntry> decode_safetensors(std::string_view file, const std::string& origin,
                                            std::map<std::string, std::string>* metadata = nullptr);

// The pieces of decoding, shared with read_safetensors_file (io/safetensors_file.h), which
// reads tensor by tensor from disk. The header's length from the file's first bytes (`start`,
// at least 8 of them unless the file is shorter), checked against the file's size:
uint64_t safetensors_header_length(std::string_view start, uint64_t file_size,
                                   const std::string& origin);
// Each tensor of the JSON header with its bytes' place [begin, end) in the data section (of
// `data_size` bytes), in the header's order; everything validated as decode_safetensors does.
struct TensorPlacement {
  TensorLayout layout;
  uint64_t begin = 0, end = 0;
};
std::vector<TensorPlacement> parse_safetensors_header(std::string_view header, uint64_t data_size,
                                                      const std::string& origin,
                                                      std::map<std::string, std::string>* metadata);

}  // namespace pipetrain
