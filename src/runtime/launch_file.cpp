#include "runtime/launch_file.h"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "io/json_file.h"

namespace pipetrain::runtime {

std::string launch_file_path(const std::string& run_dir, int64_t node_rank) {
  return (std::filesystem::path(run_dir) / fmt::format("launch-node{}.json", node_rank)).string();
}

void write_launch_file(const std::string& path, const LaunchSettings& settings) {
  const nlohmann::json json = {{"run_dir", settings.run_dir},
                               {"store_file", settings.store_file},
                               {"progress", settings.progress},
                               {"resume_from", settings.resume_from},
                               {"data_fingerprint", settings.data_fingerprint},
                               {"worker_cores", settings.worker_cores}};
  write_file_atomically(path, json.dump(2) + "\n");
}

LaunchSettings read_launch_file(const std::string& path) {
  const nlohmann::json json = parse_json_file(path);
  LaunchSettings settings;
  try {
    settings.run_dir = json.at("run_dir").get<std::string>();
    settings.store_file = json.at("store_file").get<std::string>();
    settings.progress = json.at("progress").get<bool>();
    settings.resume_from = json.at("resume_from").get<std::string>();
    settings.data_fingerprint = json.at("data_fingerprint").get<std::string>();
    settings.worker_cores = json.at("worker_cores").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not a launch file of pipetrain's launcher: {}", path, error.what());
  }
  return settings;
}

}  // namespace pipetrain::runtime
