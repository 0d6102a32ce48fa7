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

uint64_t safetensors_header_length(std::string_view start, uint64_t file_size,
                                   const std::string& origin) {
  if (file_size < 8 || start.size() < 8) fail("{}: not a safetensors file (truncated header)", origin);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t(static_cast<unsigned char>(start[i])) << (8 * i);
  if (length > file_size - 8) fail("{}: truncated safetensors header", origin);
  return length;
}

std::vector<TensorPlacement> parse_safetensors_header(std::string_view header_text, uint64_t data_size,
                                                      const std::string& origin,
                                                      std::map<std::string, std::string>* metadata) {
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(header_text);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: corrupt safetensors header: {}", origin, error.what());
  }
  if (!header.is_object()) fail("{}: corrupt safetensors header (not an object)", origin);
  std::vector<TensorPlacement> tensors;
  try {
    for (const auto& [name, entry] : header.items()) {
      if (name == "__metadata__") {
        if (metadata) *metadata = entry.get<std::map<std::string, std::string>>();
        continue;
      }
      TensorPlacement tensor;
      tensor.layout.name = name;
      tensor.layout.dtype = entry.at("dtype").get<std::string>();
      tensor.layout.shape = entry.at("shape").get<std::vector<int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<uint64_t>>();
      for (int64_t dim : tensor.layout.shape) {
        if (dim < 0) fail("{}: tensor '{}' has a negative dimension", origin, name);
      }
      if (offsets.size() != 2 || offsets[0] > offsets[1] || offsets[1] > data_size) {
        fail("{}: tensor '{}' lies outside the file (truncated?)", origin, name);
      }
      if (offsets[1] - offsets[0] != tensor_byte_size(tensor.layout)) {
        fail("{}: tensor '{}' size does not match its shape", origin, name);
      }
      tensor.begin = offsets[0];
      tensor.end = offsets[1];
      tensors.push_back(std::move(tensor));
    }
  } catch (const nlohmann::json::exception& error) {
    fail("{}: corrupt safetensors header: {}", origin, error.what());
  }
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& tensor : tensors) ranges.push_back({tensor.begin, tensor.end});
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) fail("{}: tensors overlap", origin);
  }
  return tensors;
}

std::vector<TensorEntry> decode_safetensors(std::string_view file, const std::string& origin,
                                            std::map<std::string, std::string>* metadata) {
  const uint64_t length = safetensors_header_length(file, file.size(), origin);
  const std::string_view data = file.substr(8 + length);
  std::vector<TensorEntry> tensors;
  for (auto& tensor : parse_safetensors_header(file.substr(8, length), data.size(), origin, metadata)) {
    tensors.push_back({std::move(tensor.layout.name), std::move(tensor.layout.dtype),
                       std::move(tensor.layout.shape),
                       std::string(data.substr(tensor.begin, tensor.end - tensor.begin))});
  }
  return tensors;
}

}  // namespace pipetrain
