#pragma once
// Each `pipetrain` subcommand registers itself on the root CLI11 app.
// A subcommand's callback throws pipetrain::UserError for bad input; main() turns it into
// one line on stderr and exit code 2.
#include <CLI/CLI.hpp>

namespace pipetrain::cli {

void add_train_command(CLI::App& app);     // train_command.cpp
void add_evaluate_command(CLI::App& app);  // evaluate_command.cpp
void add_export_command(CLI::App& app);    // export_command.cpp
void add_simulate_command(CLI::App& app);  // simulate_command.cpp
void add_config_command(CLI::App& app);    // config_command.cpp
void add_plan_command(CLI::App& app);      // plan_command.cpp
void add_profile_command(CLI::App& app);   // profile_command.cpp
void add_terapipe_command(CLI::App& app);  // terapipe_command.cpp
void add_terapipe_profile_command(CLI::App& app);  // terapipe_profile_command.cpp
void add_tokenizer_command(CLI::App& app);  // tokenizer_command.cpp
void add_tokenize_command(CLI::App& app);   // tokenizer_command.cpp
void add_prepare_speech_command(CLI::App& app);  // prepare_speech_command.cpp

// For counts that must be at least 1 (`->check(at_least_one())`): "must be >= 1, got 0"
// (CLI11's own PositiveNumber names a range up to 1.8e308).
inline CLI::Validator at_least_one() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        try {
          size_t used = 0;
          if (std::stod(value, &used) >= 1 && used == value.size()) return "";
        } catch (const std::exception&) {
        }
        return "must be >= 1, got " + value;
      },
      "COUNT >= 1");
}

// Every numeric option of `app` and its subcommands read as config values are (core/text's
// plain decimals: no hex, inf or nan): CLI11 alone took "0x10" as 16 and "nan" as a cost.
void require_plain_numbers(CLI::App& app);

}  // namespace pipetrain::cli
