#include "io/safetensors.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pipetrain {

size_t dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = sizes.find(dtype);
  if (it == sizes.end()) fail("unsupported tensor dtype '{}'", dtype);
  return it->second;
}

namespace {
uint64_t element_count(const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) count *= static_cast<uint64_t>(dim);
  return count;
}
}  // namespace

uint64_t tensor_byte_size(const TensorLayout& tensor) {
  return element_count(tensor.shape) * dtype_size(tensor.dtype);
}

std::string safetensors_header(const std::vector<TensorLayout>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    const uint64_t size = tensor_byte_size(tensor);
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + size}}};
    offset += size;
  }
  std::string header_text = header.dump();
  header_text.append((8 - header_text.size() % 8) % 8, ' ');  // keep data 8-byte aligned
  std::string out(8, '\0');
  uint64_t length = header_text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header_text;
}

std::string encode_safetensors(const std::vector<TensorEntry>& tensors,
                               const std::map<std::string, std::string>& metadata) {
  std::vector<TensorLayout> layouts;
  for (const auto& tensor : tensors) {
    layouts.push_back({tensor.name, tensor.dtype, tensor.shape});
    const uint64_t size = tensor_byte_size(layouts.back());
    if (size != tensor.bytes.size()) {
      fail("tensor '{}' has {} bytes, its shape needs {}", tensor.name, tensor.bytes.size(), size);
    }
  }
  std::string out = safetensors_header(layouts, metadata);
  size_t data_size = 0;
  for (const auto& tensor : tensors) data_size += tensor.bytes.size();
  out.reserve(out.size() + data_size);
  for (const auto& tensor : tensors) out += tensor.bytes;
  return out;
}

std::vector<TensorEntry> decode_safetensors(std::string_view file, const std::string& origin,
                                            std::map<std::string, std::string>* metadata) {
  if (file.size() < 8) fail("{}: not a safetensors file (truncated header)", origin);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(static_cast<unsigned char>(file[i])) << (8 * i);
  if (length > file.size() - 8) fail("{}: truncated safetensors header", origin);
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.substr(8, length));
  } catch (const nlohmann::json::exception& error) {
    fail("{}: corrupt safetensors header: {}", origin, error.what());
  }
  if (!header.is_object()) fail("{}: corrupt safetensors header (not an object)", origin);
  const std::string_view data = file.substr(8 + length);
  std::vector<TensorEntry> tensors;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (metadata) *metadata = entry.get<std::map<std::string, std::string>>();
        continue;
      }
      TensorEntry tensor;
      tensor.name = name;
      tensor.dtype = entry.at("dtype").get<std::string>();
      tensor.shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      for (int64_t dim : tensor.shape) {
        if (dim < 0) fail("{}: tensor '{}' has a negative dimension", origin, name);
      }
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data.size()) {
        fail("{}: tensor '{}' lies outside the file (truncated?)", origin, name);
      }
      if (offsets[1] - offsets[0] != element_count(tensor.shape) * dtype_size(tensor.dtype)) {
        fail("{}: tensor '{}' size does not match its shape", origin, name);
      }
      tensor.bytes = std::string(data.substr(offsets[0], offsets[1] - offsets[0]));
      ranges.push_back({offsets[0], offsets[1]});
      tensors.push_back(std::move(tensor));
    }
  } catch (const nlohmann::json::exception& error) {
    fail("{}: corrupt safetensors header: {}", origin, error.what());
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) fail("{}: tensors overlap", origin);
  }
  return tensors;
}

}  // namespace pipetrain
