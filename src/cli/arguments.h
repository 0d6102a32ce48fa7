#pragma once
// Arguments shared by `train` and `config`: an optional CONFIG.toml, `--section.field VALUE`
// (or `--section.field=VALUE`) overrides, and command-specific flags.
#include <map>
#include <string>
#include <vector>

#include "core/config.h"

namespace pipetrain::cli {

struct ConfigArguments {
  std::string config_path;                               // "" = embedded defaults
  std::vector<std::pair<std::string, std::string>> overrides;  // in command-line order
  std::map<std::string, std::string> options;            // known command flags with values
  std::vector<std::string> flags;                        // known command flags without values
};

// train's pipeline shorthands as config fields: `--stages 2` -> `--pipeline.stages 2`, `--zero1`
// -> `--pipeline.zero1 1`, and so on (train's --help lists them).
std::vector<std::string> expand_pipeline_shorthands(const std::vector<std::string>& args);

// `value_options` / `flag_options`: the command's own flags (e.g. "--run-dir", "--overwrite").
ConfigArguments parse_config_arguments(const std::vector<std::string>& args,
                                       const std::vector<std::string>& value_options,
                                       const std::vector<std::string>& flag_options);

// Defaults (or the file), then the overrides, then cross-field validation and a schedule the
// runtime runs.
Config resolve_config(const ConfigArguments& arguments);

bool has_flag(const ConfigArguments& arguments, const std::string& flag);

// A command flag's whole number in [1, most] (`fallback` when absent); UserError naming it
// otherwise (a count narrowed to int must not wrap around).
int64_t positive_option(const ConfigArguments& arguments, const std::string& name, int64_t fallback, int64_t most);
// The measuring commands' most timing repeats (their threads: most_compute_threads, preflight.h).
constexpr int64_t kMaxRepeats = 1000000;

// For a run folder's own config (resume, evaluate, export): the weights come from the run's
// checkpoint, so model.init_from (whose config.json already set the shape in config.toml) is
// neither read nor needed any more; an override given after this one still applies.
void weights_from_checkpoint(ConfigArguments& arguments);

// A run folder's own config (DIR/config.toml) plus the overrides, its weights from its
// checkpoint (evaluate, export). UserError for a config file given too, or no run folder.
Config run_folder_config(ConfigArguments arguments, const std::string& run_dir,
                         const std::string& command);

}  // namespace pipetrain::cli
