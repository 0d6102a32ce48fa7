#pragma once
// A plan written by `pipetrain plan --out plan.json`, turned into the config fields that run it
// (`pipetrain train --plan plan.json`): model shape, stages, width, microbatching, schedule,
// partition and recomputation.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pipetrain::plan {

// ("section.field", value) pairs in config-override form; UserError naming `origin` for a file
// that is not a complete pipetrain plan.
std::vector<std::pair<std::string, std::string>> plan_config_overrides(const nlohmann::json& plan,
                                                                       const std::string& origin);

}  // namespace pipetrain::plan
