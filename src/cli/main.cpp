// `pipetrain`: one binary, one subcommand per job. User errors become one line and exit 2.
#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/stop_signal.h"

int main(int argc, char** argv) {
  pipetrain::keep_freed_memory_in_process();
  CLI::App app{"pipetrain: memory-efficient pipeline-parallel training"};
  app.require_subcommand(1);
  pipetrain::cli::add_train_command(app);
  pipetrain::cli::add_simulate_command(app);
  pipetrain::cli::add_profile_command(app);
  pipetrain::cli::add_plan_command(app);
  pipetrain::cli::add_terapipe_command(app);
  pipetrain::cli::add_terapipe_profile_command(app);
  pipetrain::cli::add_config_command(app);
  pipetrain::cli::add_tokenizer_command(app);
  pipetrain::cli::add_tokenize_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const pipetrain::UserError& error) {
    fmt::print(stderr, "pipetrain: error: {}\n", error.what());
    return 2;
  } catch (const pipetrain::StopRequested& stop) {
    if (!stop.message.empty()) fmt::print(stderr, "pipetrain: {}\n", stop.message);
    return 128 + stop.signal;
  } catch (const std::exception& error) {
    std::string message = error.what();
    message = message.substr(0, message.find('\n'));  // libtorch appends a backtrace
    fmt::print(stderr, "pipetrain: internal error: {}\n", message);
    return 1;
  }
  return 0;
}
