#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"

namespace pipetrain::cli {

void add_config_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "config", "Print the resolved config as TOML ([CONFIG.toml] [--section.field VALUE ...]), "
                "or the config reference (--reference)");
  cmd->footer(
      "  CONFIG.toml, --section.field VALUE   the config to resolve, as for train\n"
      "  --reference                          print every field's type, default and meaning\n"
      "                                       (docs/config.md is this output)");
  cmd->prefix_command();
  cmd->callback([cmd] {
    const auto arguments = parse_config_arguments(cmd->remaining(), {}, {"--reference"});
    const Config config = resolve_config(arguments);  // a bad value is an error with --reference too
    if (has_flag(arguments, "--reference")) return void(fmt::print("{}", config_reference_markdown()));
    fmt::print("{}", to_toml(config));
  });
}

}  // namespace pipetrain::cli
