#pragma once
// Reads a JSON file with the project's error convention (UserError naming file and problem).
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"

namespace pipetrain {

inline nlohmann::json parse_json_file(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    fail("{}: not valid JSON: {}", path, error.what());
  }
}

}  // namespace pipetrain
