#include "hf/hf_checkpoint.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/files.h"
#include "io/safetensors_file.h"

namespace pipetrain::hf {
namespace {

namespace fs = std::filesystem;
constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
// transformers refuses safetensors files whose metadata does not name a format it knows.
const std::map<std::string, std::string> kMetadata = {{"format", "pt"}};

std::map<std::string, std::string> read_index(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexFile).string();
  nlohmann::json index;
  try {
    index = nlohmann::json::parse(read_regular_file(path, "checkpoint index"));
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON ({})", path, error.what());
  }
  if (!index.contains("weight_map") || !index["weight_map"].is_object()) {
    fail("{}: no \"weight_map\" object", path);
  }
  std::map<std::string, std::string> shard_of;
  for (const auto& [name, file] : index["weight_map"].items()) {
    if (!file.is_string()) fail("{}: the shard of '{}' is not a file name", path, name);
    const std::string shard = file.get<std::string>();
    if (shard.find('/') != std::string::npos || shard == "..") {
      fail("{}: shard '{}' of '{}' is not a file name in the folder", path, shard, name);
    }
    const std::string shard_path = (fs::path(dir) / shard).string();
    if (!fs::exists(shard_path)) fail("{} names shard '{}', which is missing", path, shard);
    shard_of[name] = shard_path;
  }
  return shard_of;
}

std::vector<std::vector<const TensorEntry*>> split_into_shards(const std::vector<TensorEntry>& tensors,
                                                               uint64_t shard_bytes) {
  std::vector<std::vector<const TensorEntry*>> shards(1);
  uint64_t bytes = 0;
  for (const auto& tensor : tensors) {
    if (!shards.back().empty() && bytes + tensor.bytes.size() > shard_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(&tensor);
    bytes += tensor.bytes.size();
  }
  return shards;
}

void write_shard(const std::string& path, const std::vector<const TensorEntry*>& tensors) {
  std::vector<TensorLayout> layouts;
  for (const auto* tensor : tensors) layouts.push_back({tensor->name, tensor->dtype, tensor->shape});
  SafetensorsFileWriter out(path, layouts, kMetadata);
  for (const auto* tensor : tensors) out.write_tensor(tensor->bytes);
  out.commit();
}

}  // namespace

CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)) {
  const std::string single = (fs::path(dir_) / kSingleFile).string();
  if (fs::exists(fs::path(dir_) / kIndexFile)) {
    shard_of_ = read_index(dir_);
  } else if (fs::exists(single)) {
    for (const auto& layout : read_safetensors_layout(single)) shard_of_[layout.name] = single;
  } else {
    fail("model.init_from: '{}' holds neither {} nor {} (pipetrain reads safetensors weights; "
         "save with safe_serialization)", dir_, kSingleFile, kIndexFile);
  }
}

std::vector<TensorEntry> CheckpointReader::read(const std::vector<std::string>& names) const {
  std::map<std::string, std::vector<std::string>> by_shard;
  for (const auto& name : names) {
    const auto shard = shard_of_.find(name);
    if (shard == shard_of_.end()) fail("model.init_from: '{}' has no tensor '{}'", dir_, name);
    by_shard[shard->second].push_back(name);
  }
  std::vector<TensorEntry> tensors;
  for (const auto& [shard, wanted] : by_shard) {
    for (auto& tensor : read_safetensors_tensors(shard, wanted)) tensors.push_back(std::move(tensor));
  }
  return tensors;
}

std::vector<std::string> write_checkpoint(const std::string& dir, const std::vector<TensorEntry>& tensors,
                                          uint64_t shard_bytes) {
  const auto shards = split_into_shards(tensors, shard_bytes);
  if (shards.size() == 1) {
    write_shard((fs::path(dir) / kSingleFile).string(), shards[0]);
    return {kSingleFile};
  }
  std::vector<std::string> files;
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string file = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    write_shard((fs::path(dir) / file).string(), shards[i]);
    for (const auto* tensor : shards[i]) {
      weight_map[tensor->name] = file;
      total += tensor->bytes.size();
    }
    files.push_back(file);
  }
  const nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomically((fs::path(dir) / kIndexFile).string(), index.dump(2) + "\n");
  files.push_back(kIndexFile);
  return files;
}

}  // namespace pipetrain::hf
