// `pipetrain`'s command line: one subcommand per job. User errors become one line and exit 2.
#include "cli/run_cli.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <regex>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/stop_signal.h"
#include "core/text.h"
#include "device/torch_build.h"
#include "runtime/pipeline.h"

namespace {

// A worker started by pipetrain's launcher hands its error line to the launcher, which reports
// the run's cause once; any other process prints it.
void print_error(const std::string& line) {
  const char* file = std::getenv(pipetrain::runtime::kWorkerErrorFileVariable);
  if (file != nullptr && *file != 0) {
    std::ofstream out(file);
    if (out << line << "\n" << std::flush) return;
  }
  fmt::print(stderr, "{}\n", line);
}

// CLI11 would say "A subcommand is required" (exit 106) for a misspelled command.
void check_command_name(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const auto* command : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(command->get_name());
  }
  if (argc < 2) {
    pipetrain::fail("a command is required: {} (pipetrain --help)", pipetrain::join(commands, ", "));
  }
  const std::string name = argv[1];
  if (name.rfind("-", 0) == 0 || std::find(commands.begin(), commands.end(), name) != commands.end()) {
    return;
  }
  const std::string near = pipetrain::closest_match(name, commands);
  pipetrain::fail("unknown command '{}'{}; commands: {}", name,
                  near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near),
                  pipetrain::join(commands, ", "));
}

}  // namespace

int pipetrain::run_cli(int argc, char** argv) {
  pipetrain::keep_freed_memory_in_process();
  CLI::App app{"pipetrain: memory-efficient pipeline-parallel training"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       [] { return "pipetrain: " + pipetrain::describe(pipetrain::torch_build()); });
  pipetrain::cli::add_train_command(app);
  pipetrain::cli::add_simulate_command(app);
  pipetrain::cli::add_profile_command(app);
  pipetrain::cli::add_plan_command(app);
  pipetrain::cli::add_evaluate_command(app);
  pipetrain::cli::add_export_command(app);
  pipetrain::cli::add_terapipe_command(app);
  pipetrain::cli::add_terapipe_profile_command(app);
  pipetrain::cli::add_config_command(app);
  pipetrain::cli::add_tokenizer_command(app);
  pipetrain::cli::add_tokenize_command(app);
  pipetrain::cli::add_prepare_speech_command(app);
  pipetrain::cli::require_plain_numbers(app);
  try {
    check_command_name(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ConversionError& error) {
    // A plain whole number (require_plain_numbers) that CLI11 could not convert: out of the
    // option's range ("Could not convert: --stages = 2147483648").
    const std::string text = std::regex_replace(error.what(), std::regex("^Could not convert: (.*) = (.*)$"),
                                                "$1: $2 is out of range");
    print_error(fmt::format("pipetrain: error: {}", text));
    return 2;
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help
    print_error(fmt::format("pipetrain: error: {}", error.what()));
    return 2;
  } catch (const pipetrain::UserError& error) {
    print_error(fmt::format("pipetrain: error: {}", error.what()));
    return 2;
  } catch (const pipetrain::StopRequested& stop) {
    if (!stop.message.empty()) fmt::print(stderr, "pipetrain: {}\n", stop.message);
    return 128 + stop.signal;
  } catch (const std::exception& error) {
    std::string message = error.what();
    message = message.substr(0, message.find('\n'));  // libtorch appends a backtrace
    print_error(fmt::format("pipetrain: internal error: {}", message));
    return 1;
  }
  return 0;
}
