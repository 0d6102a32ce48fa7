#include "io/checkpoint_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>  // renameat2
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "io/crc32c.h"
#include "io/safetensors_file.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

constexpr const char* kFormat = "pipetrain-checkpoint-3";
// Before per-file checksums: still read, without verifying the files' bytes.
constexpr const char* kFormatWithoutChecksums = "pipetrain-checkpoint-2";

template <typename T>
T field(const nlohmann::json& json, const char* key, const std::string& origin) {
  if (!json.contains(key)) fail("{}: checkpoint.json has no '{}' (damaged or not a pipetrain checkpoint)", origin, key);
  try {
    return json.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    fail("{}: checkpoint.json field '{}' has the wrong type", origin, key);
  }
}

// Complete checkpoint folders (step-N: no .partial or .old), oldest first: by step, as names
// sort only up to six digits (step-1000000 would come before step-999000).
std::vector<fs::path> complete_checkpoints(const fs::path& root) {
  std::vector<std::pair<int64_t, fs::path>> steps;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    const std::string name = entry.path().filename().string();
    const std::string digits = name.substr(std::min(name.size(), std::string("step-").size()));
    if (entry.is_directory() && name.rfind("step-", 0) == 0 && !digits.empty() && digits.size() <= 18 &&
        digits.find_first_not_of("0123456789") == std::string::npos) {
      steps.emplace_back(std::stoll(digits), entry.path());
    }
  }
  std::sort(steps.begin(), steps.end());
  std::vector<fs::path> out;
  for (auto& [step, path] : steps) out.push_back(std::move(path));
  return out;
}

// Swaps two folders in one step (Linux's renameat2 RENAME_EXCHANGE), so a crash leaves one
// complete folder under each name; false where the file system cannot.
bool exchange_folders(const fs::path& a, const fs::path& b) {
  return ::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0;
}

bool is_crc32c_hex(const std::string& text) {
  return text.size() == 8 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Every listed file has its checksum (format 3).
void check_checksums_listed(const CheckpointInfo& info, const std::string& origin) {
  std::vector<std::string> files = info.optimizer_files;
  for (const auto& versions : info.weight_versions) files.insert(files.end(), versions.begin(), versions.end());
  for (const auto& file : files) {
    const auto it = info.crc32c.find(file);
    if (it == info.crc32c.end() || !is_crc32c_hex(it->second)) {
      fail("{}: checkpoint.json has no valid CRC32C for '{}' (damaged?)", origin, file);
    }
  }
}

// The sidecar's own CRC32C, over its other fields as written (nlohmann's objects keep their keys
// sorted, so the text re-dumped from a parse is the text the writer checksummed): a changed step,
// format or partition is refused like a flipped bit in a tensor file.
constexpr const char* kSidecarChecksum = "checkpoint_json_crc32c";

std::string sidecar_checksum(nlohmann::json json) {
  json.erase(kSidecarChecksum);
  return crc32c_hex(json.dump(2));
}

// Sidecars written before it carry none, and load unverified.
void check_sidecar_checksum(const nlohmann::json& json, const std::string& origin) {
  if (!json.contains(kSidecarChecksum)) return;
  const auto& recorded = json.at(kSidecarChecksum);
  if (!recorded.is_string() || recorded.get<std::string>() != sidecar_checksum(json)) {
    fail("{}: checkpoint.json changed after it was written (its own CRC32C does not match: damaged "
         "or edited); a checkpoint resumes only as written", origin);
  }
}

}  // namespace

std::string checkpoint_info_json(const CheckpointInfo& info) {
  nlohmann::json partition = nlohmann::json::array();
  for (const auto& [first, last] : info.partition) partition.push_back({first, last});
  nlohmann::json json = {{"format", kFormat},
                               {"step", info.step},
                               {"data_position", info.data_position},
                               {"schedule", info.schedule},
                               {"policy", info.policy},
                               {"stages", info.stages},
                               {"partition", partition},
                               {"optimizer", info.optimizer},
                               {"layers", info.layers},
                               {"model_shape", info.model_shape},
                               {"val_loss", info.val_loss},
                               {"config_hash", info.config_hash},
                               {"rng_state", info.rng_state},
                               {"weight_versions", info.weight_versions},
                               {"optimizer_files", info.optimizer_files},
                               {"crc32c", info.crc32c},
                               {"config", info.config_toml}};
  if (!info.data_fingerprint.empty()) json["data"] = info.data_fingerprint;
  if (info.loss_scale > 0) {
    json["loss_scale"] = info.loss_scale;
    json["loss_scale_good_steps"] = info.loss_scale_good_steps;
    json["loss_scale_applied_steps"] = info.loss_scale_applied_steps;
    json["loss_scale_previous"] = info.loss_scale_previous;
  }
  json[kSidecarChecksum] = sidecar_checksum(json);  // last: over every other field
  return json.dump(2) + "\n";
}

namespace {

// Float16's loss scale and its counts (present when the run scales its loss).
void read_loss_scale(const nlohmann::json& json, const std::string& origin, CheckpointInfo& info) {
  info.loss_scale = field<double>(json, "loss_scale", origin);
  info.loss_scale_good_steps = field<int64_t>(json, "loss_scale_good_steps", origin);
  info.loss_scale_applied_steps = field<int64_t>(json, "loss_scale_applied_steps", origin);
  if (json.contains("loss_scale_previous")) {
    info.loss_scale_previous = field<double>(json, "loss_scale_previous", origin);
  }
  // (Updates applied may exceed the steps: per-microbatch policies update m times a step.)
  if (!(info.loss_scale >= 1) || info.loss_scale_good_steps < 0 || info.loss_scale_applied_steps < 0 ||
      (json.contains("loss_scale_previous") && !(info.loss_scale_previous >= 1))) {
    fail("{}: checkpoint.json's loss scale ({}, previous {}, {} good steps, {} applied) is out of "
         "range", origin, info.loss_scale, info.loss_scale_previous, info.loss_scale_good_steps,
         info.loss_scale_applied_steps);
  }
}

// The stage counts agree, and every weight file is a plain name inside the checkpoint.
void check_consistent(const CheckpointInfo& info, const std::string& origin) {
  if (info.step < 0 || info.stages < 1 || int64_t(info.partition.size()) != info.stages ||
      int64_t(info.weight_versions.size()) != info.stages) {
    fail("{}: checkpoint.json is inconsistent (step {}, {} stages, {} partition entries, {} weight "
         "lists)", origin, info.step, info.stages, info.partition.size(), info.weight_versions.size());
  }
  for (const auto& versions : info.weight_versions) {
    if (versions.empty()) fail("{}: checkpoint.json lists a stage without weights", origin);
    for (const auto& file : versions) {
      if (file.empty() || file.find('/') != std::string::npos || file.find("..") != std::string::npos) {
        fail("{}: checkpoint.json names an invalid weight file '{}'", origin, file);
      }
    }
  }
}

}  // namespace

CheckpointInfo parse_checkpoint_info(const std::string& text, const std::string& origin) {
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) fail("{}: checkpoint.json is not valid JSON (damaged?)", origin);
  check_sidecar_checksum(json, origin);
  const auto format = field<std::string>(json, "format", origin);
  if (format != kFormat && format != kFormatWithoutChecksums) {
    fail("{}: checkpoint format '{}' is not '{}'", origin, format, kFormat);
  }
  CheckpointInfo info;
  info.step = field<int64_t>(json, "step", origin);
  info.data_position = field<int64_t>(json, "data_position", origin);
  info.schedule = field<std::string>(json, "schedule", origin);
  info.policy = field<std::string>(json, "policy", origin);
  info.stages = field<int64_t>(json, "stages", origin);
  info.partition = field<std::vector<std::pair<int64_t, int64_t>>>(json, "partition", origin);
  info.optimizer = field<std::string>(json, "optimizer", origin);
  info.layers = field<int64_t>(json, "layers", origin);
  info.model_shape = field<std::vector<int64_t>>(json, "model_shape", origin);
  info.val_loss = json.contains("val_loss") && json["val_loss"].is_number() ? json["val_loss"].get<double>() : 0.0;
  if (json.contains("loss_scale")) read_loss_scale(json, origin, info);
  info.config_hash = field<std::string>(json, "config_hash", origin);
  info.rng_state = field<std::string>(json, "rng_state", origin);
  info.weight_versions = field<std::vector<std::vector<std::string>>>(json, "weight_versions", origin);
  info.optimizer_files = field<std::vector<std::string>>(json, "optimizer_files", origin);
  info.config_toml = field<std::string>(json, "config", origin);
  if (json.contains("data")) info.data_fingerprint = field<std::string>(json, "data", origin);
  if (format == kFormat) info.crc32c = field<std::map<std::string, std::string>>(json, "crc32c", origin);
  check_consistent(info, origin);
  if (format == kFormat) check_checksums_listed(info, origin);
  return info;
}

std::vector<TensorEntry> read_checkpoint_file(const std::string& dir, const std::string& file,
                                              const CheckpointInfo& info) {
  const std::string path = (fs::path(dir) / file).string();
  if (!fs::exists(path)) fail("{}: file missing (checkpoint incomplete or damaged)", path);
  uint32_t crc = 0;
  // Tensor by tensor, no copy of the whole file; its own messages say what is malformed.
  auto entries = read_safetensors_file(path, &crc);
  if (info.crc32c.empty()) return entries;  // written before checksums
  const auto recorded = info.crc32c.find(file);
  if (recorded == info.crc32c.end()) fail("{}: checkpoint.json records no CRC32C for it (damaged?)", path);
  const std::string actual = format_crc32c(crc);
  if (actual != recorded->second) {
    fail("{}: damaged: its CRC32C is {}, checkpoint.json recorded {}", path, actual, recorded->second);
  }
  return entries;
}

std::string config_hash(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a 64: the offset basis, then xor and multiply
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", hash);
}

std::string checkpoints_root(const std::string& run_dir) { return (fs::path(run_dir) / "checkpoints").string(); }

std::string run_dir_of_checkpoint(const std::string& step_dir) {
  fs::path path = fs::path(step_dir).lexically_normal();
  if (!path.has_filename()) path = path.parent_path();  // "step-N/"
  return path.parent_path().parent_path().string();
}

std::string step_dir_name(int64_t step) { return fmt::format("step-{:06d}", step); }

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string begin_checkpoint(const std::string& run_dir, int64_t step) {
  const fs::path partial = fs::path(checkpoints_root(run_dir)) / (step_dir_name(step) + ".partial");
  std::error_code error;
  fs::remove_all(partial, error);  // left by a crash: never complete, never referenced
  fs::create_directories(partial, error);
  if (error) fail("cannot create checkpoint folder '{}': {}", partial.string(), error.message());
  return partial.string();
}

std::string commit_checkpoint(const std::string& run_dir, const CheckpointInfo& info, int64_t keep) {
  const fs::path root = checkpoints_root(run_dir);
  const fs::path partial = root / (step_dir_name(info.step) + ".partial");
  const fs::path final_dir = root / step_dir_name(info.step);
  write_file_atomically((partial / "checkpoint.json").string(), checkpoint_info_json(info));
  fsync_directory(partial.string());
  std::error_code error;
  // The same step again (a resumed run): replaced whole, by an exchange where the file system
  // can (the earlier one then sits under .partial until it goes); else renamed to .old first,
  // which leaves an instant with no step-N.
  fs::path replaced = root / (step_dir_name(info.step) + ".old");
  if (fs::exists(final_dir) && exchange_folders(partial, final_dir)) {
    replaced = partial;
  } else {
    if (fs::exists(final_dir)) {
      fs::remove_all(replaced, error);
      fs::rename(final_dir, replaced, error);
      if (error) fail("cannot replace checkpoint '{}': {}", final_dir.string(), error.message());
    }
    fs::rename(partial, final_dir, error);
    if (error) fail("cannot finish checkpoint '{}': {}", final_dir.string(), error.message());
  }
  fsync_directory(root.string());
  write_file_atomically((root / "latest").string(), step_dir_name(info.step) + "\n");
  fsync_directory(root.string());
  fs::remove_all(replaced, error);
  auto complete = complete_checkpoints(root);
  for (size_t i = 0; i + size_t(std::max<int64_t>(keep, 1)) < complete.size(); ++i) {
    if (complete[i] != final_dir) fs::remove_all(complete[i], error);
  }
  return final_dir.string();
}

std::string latest_checkpoint_or_empty(const std::string& run_dir) {
  const fs::path root = checkpoints_root(run_dir);
  std::error_code error;
  if (!fs::exists(root / "latest", error)) return "";
  std::string name = read_file((root / "latest").string());
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.rfind("step-", 0) != 0 || name.find('/') != std::string::npos) return "";
  const fs::path dir = root / name;
  return fs::is_directory(dir, error) ? dir.string() : "";
}

std::string latest_checkpoint(const std::string& run_dir) {
  if (!fs::is_directory(run_dir)) fail("--resume: run folder '{}' does not exist", run_dir);
  const std::string dir = latest_checkpoint_or_empty(run_dir);
  if (dir.empty()) {
    fail("--resume: '{}' has no complete checkpoint ({}/latest missing or naming no folder)",
         run_dir, checkpoints_root(run_dir));
  }
  return dir;
}

}  // namespace pipetrain
