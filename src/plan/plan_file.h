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

// A file's `config_fields` (a plan's, a profile's): {"section.field": "value"}, each a known field
// whose value it takes, checked here so a bad one is blamed on the file, not the command line.
// Absent: none.
std::vector<std::pair<std::string, std::string>> config_fields_from_json(const nlohmann::json& file,
                                                                         const std::string& origin);
// `fields` as a file's `config_fields` object: the last value of a key given twice wins, as on
// the command line.
nlohmann::json config_fields_to_json(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace pipetrain::plan
