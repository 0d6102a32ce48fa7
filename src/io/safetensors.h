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

struct TensorEntry {
  std::string name;
  std::string dtype;  // "F32", "F64", "I64", ...
  std::vector<int64_t> shape;
  std::string bytes;  // raw data, row-major
};

size_t dtype_size(const std::string& dtype);  // UserError for unknown dtypes

std::string encode_safetensors(const std::vector<TensorEntry>& tensors,
                               const std::map<std::string, std::string>& metadata = {});

// Validates everything (sizes, offsets, overlaps, dtypes); UserError naming `origin` on damage.
std::vector<TensorEntry> decode_safetensors(std::string_view file, const std::string& origin,
                                            std::map<std::string, std::string>* metadata = nullptr);

}  // namespace pipetrain
