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

}  // namespace pipetrain::cli
