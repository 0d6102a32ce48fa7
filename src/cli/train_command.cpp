#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/files.h"
#include "train/run.h"

namespace pipetrain::cli {
namespace {

constexpr const char* kTrainUsage = R"(Usage: pipetrain train [CONFIG.toml] [--section.field VALUE ...] [options]

Trains a GPT. With no arguments: the embedded default (byte-level GPT on
data/tinyshakespeare.txt, a few minutes on 2 cores). Any config field can be
overridden, e.g. --model.layers 8 --train.steps 200 (see docs/config.md).

Options:
  --run-dir DIR   run folder (default: runs/run-<date>-<time>)
  --overwrite     allow a run folder that already holds a run
  --quiet         no live progress line
  -h, --help      this text
)";

void run_train(const std::vector<std::string>& args) {
  const auto arguments = parse_config_arguments(args, {"--run-dir"}, {"--overwrite", "--quiet"});
  const Config config = resolve_config(arguments);
  RunOptions options;
  const auto run_dir = arguments.options.find("--run-dir");
  options.run_dir = run_dir != arguments.options.end() ? run_dir->second : new_run_dir_name("runs");
  options.overwrite = has_flag(arguments, "--overwrite");
  options.progress = !has_flag(arguments, "--quiet");
  options.data_root = PIPETRAIN_SOURCE_DIR;  // so data/... works from any folder
  const RunSummary summary = run_training(config, options);
  if (!summary.sample.empty()) fmt::print("\n--- sample ---\n{}\n--------------\n", summary.sample);
  fmt::print("done: {} steps in {:.0f} s, {:.0f} tokens/s, final loss {:.4f}, validation loss {:.4f}\n",
             summary.steps, summary.seconds, summary.tokens_per_s, summary.final_loss,
             summary.final_val_loss);
  fmt::print("run folder: {} (metrics.jsonl, loss.svg, config.toml, checkpoint/, sample.txt)\n",
             options.run_dir);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model (default: GPT on tinyshakespeare)");
  cmd->prefix_command();  // we parse `--section.field VALUE` ourselves
  cmd->set_help_flag();
  cmd->callback([cmd] {
    const auto args = cmd->remaining();
    for (const auto& arg : args) {
      if (arg == "-h" || arg == "--help") return void(fmt::print("{}", kTrainUsage));
    }
    run_train(args);
  });
}

}  // namespace pipetrain::cli
