#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "model/registry.h"
#include "runtime/run_spec.h"

namespace pipetrain::cli {

void add_config_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "config", "Print the resolved config as TOML ([CONFIG.toml] [--section.field VALUE ...]), "
                "or the config reference (--reference)");
  cmd->footer(
      "  CONFIG.toml, --section.field VALUE   the config to resolve, as for train (its shorthands\n"
      "                                       --stages, --schedule, --microbatches, ... too)\n"
      "  --reference                          print every field's type, default and meaning\n"
      "                                       (docs/config.md is this output)\n"
      "The config is checked as train checks it, but for this machine's GPUs and memory.");
  cmd->prefix_command();
  cmd->callback([cmd] {
    const auto arguments = parse_config_arguments(expand_pipeline_shorthands(cmd->remaining()), {}, {"--reference"});
    const Config config = resolve_config(arguments);  // a bad value is an error with --reference too
    if (has_flag(arguments, "--reference")) return void(fmt::print("{}", config_reference_markdown()));
    // train's cross-field checks (model, data format, partition, schedule), except what depends
    // on this machine: the config may be for another one (a GPU's device and graphs).
    Config here = config;
    here.train.device = "cpu";
    here.train.cuda_graphs = 0;
    // "measured" is cut by train's launcher from layer times it takes where the workers run:
    // checked here as the balanced cut it starts from.
    if (here.pipeline.partition == "measured") here.pipeline.partition = "balanced";
    runtime::make_run_spec(here);
    require_data_format(config.data.format);
    fmt::print("{}", to_toml(config));
  });
}

}  // namespace pipetrain::cli
