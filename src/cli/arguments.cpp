#include "cli/arguments.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "hf/hf_config.h"
#include "schedule/catalogue.h"

namespace pipetrain::cli {
namespace {
bool contains(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}
}  // namespace

ConfigArguments parse_config_arguments(const std::vector<std::string>& args,
                                       const std::vector<std::string>& value_options,
                                       const std::vector<std::string>& flag_options) {
  ConfigArguments parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      if (!parsed.config_path.empty()) {
        fail("unexpected argument '{}' (the config file is already '{}')", arg, parsed.config_path);
      }
      parsed.config_path = arg;
      continue;
    }
    std::string name = arg, value;
    const auto equals = arg.find('=');
    const bool inline_value = equals != std::string::npos;
    if (inline_value) name = arg.substr(0, equals), value = arg.substr(equals + 1);
    if (contains(flag_options, name)) {
      if (inline_value) fail("{} takes no value", name);
      parsed.flags.push_back(name);
      continue;
    }
    const bool is_field = name.find('.') != std::string::npos;
    if (!is_field && !contains(value_options, name)) fail("unknown option '{}'", name);
    if (!inline_value) {
      if (i + 1 >= args.size()) fail("{} needs a value", name);
      value = args[++i];
    }
    if (is_field) {
      parsed.overrides.emplace_back(name.substr(2), value);
    } else {
      parsed.options[name] = value;
    }
  }
  return parsed;
}

Config resolve_config(const ConfigArguments& arguments) {
  Config config = arguments.config_path.empty() ? Config{} : load_config_file(arguments.config_path);
  std::string schedule_origin = arguments.config_path;
  // A preset first, so the shape fields given beside it override it.
  auto overrides = arguments.overrides;
  std::stable_partition(overrides.begin(), overrides.end(),
                        [](const auto& field) { return field.first == "model.preset"; });
  for (const auto& [key, value] : overrides) {
    set_field_from_string(config, key, value);
    if (key == "pipeline.schedule") schedule_origin = "--" + key;
  }
  // The shape its config.json describes, checked against the fields given (the file's, the
  // command line's: at their default values too).
  std::set<std::string> given;
  if (!arguments.config_path.empty()) given = config_file_fields(arguments.config_path);
  for (const auto& override_field : arguments.overrides) given.insert(override_field.first);
  hf::apply_init_from(config, given);
  validate(config);
  // The schedule's name is the catalogue's to check (core sits below it).
  const auto& entry = schedule::runtime_schedule(config.pipeline.schedule, schedule_origin);
  // Checked here, not only by the pipeline runtime: a synchronous one-process run would ignore it.
  if (auto refusal = entry.sync_warmup_refusal(config.pipeline.sync_warmup_steps); !refusal.empty()) {
    fail("{}", refusal);
  }
  return config;
}

void weights_from_checkpoint(ConfigArguments& arguments) {
  arguments.overrides.insert(arguments.overrides.begin(), {"model.init_from", ""});
}

Config run_folder_config(ConfigArguments arguments, const std::string& run_dir,
                         const std::string& command) {
  if (!arguments.config_path.empty()) {
    fail("{} reads the run's own config ({}/config.toml); give overrides instead of the config "
         "file '{}'", command, run_dir, arguments.config_path);
  }
  require_folder(run_dir, "run folder", "config.toml and the checkpoints", "--run-dir: ");
  arguments.config_path = run_dir + "/config.toml";
  if (!std::filesystem::exists(arguments.config_path)) {
    fail("--run-dir: '{}' is not a run folder (no config.toml)", run_dir);
  }
  weights_from_checkpoint(arguments);
  return resolve_config(arguments);
}

bool has_flag(const ConfigArguments& arguments, const std::string& flag) {
  return contains(arguments.flags, flag);
}

int64_t positive_option(const ConfigArguments& arguments, const std::string& name, int64_t fallback, int64_t most) {
  const auto it = arguments.options.find(name);
  if (it == arguments.options.end()) return fallback;
  const auto value = parse_int(it->second);
  if (!value || *value < 1 || *value > most) {
    fail("{}: expected a whole number from 1 to {}, got '{}'", name, most, it->second);
  }
  return *value;
}

std::vector<std::string> expand_pipeline_shorthands(const std::vector<std::string>& args) {
  static const std::vector<std::pair<std::string, std::string>> shorthands = {
      {"--stages", "--pipeline.stages"},       {"--schedule", "--pipeline.schedule"},
      {"--microbatches", "--train.microbatches"}, {"--dp-width", "--pipeline.dp_width"},
      {"--partition", "--pipeline.partition"}, {"--chunks", "--pipeline.chunks"},
      {"--nnodes", "--pipeline.nnodes"},       {"--node-rank", "--pipeline.node_rank"},
      {"--master-addr", "--pipeline.master_addr"}, {"--master-port", "--pipeline.master_port"}};
  std::vector<std::string> out;
  for (const auto& arg : args) {
    if (arg == "--zero1") {  // a flag: takes no value
      out.insert(out.end(), {"--pipeline.zero1", "1"});
      continue;
    }
    std::string expanded = arg;
    for (const auto& [shorthand, key] : shorthands) {
      if (arg == shorthand) expanded = key;
      if (arg.rfind(shorthand + "=", 0) == 0) expanded = key + arg.substr(shorthand.size());
    }
    out.push_back(expanded);
  }
  return out;
}

}  // namespace pipetrain::cli
