// `pipetrain evaluate`: a run's checkpoint on a held-out split, in one process.
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/preflight.h"
#include "core/error.h"
#include "core/progress.h"
#include "train/checkpoint_evaluation.h"
#include "train/run.h"

namespace pipetrain::cli {
namespace {

constexpr const char* kEvaluateUsage = R"(Usage: pipetrain evaluate --run-dir DIR [--checkpoint PATH] [--split NAME]
                          [--json] [--section.field VALUE ...]

Loads a run's config (DIR/config.toml) and checkpoint, and validates the weights in one
process as training validates them: the loss and the model's own measures (accuracy for
the CNN, cer for the transducer) over eval.batches batches of train.batch_size rows, and
for a recognizer a few decoded validation utterances beside their references. A pipeline
run's checkpoint loads the same way. Overrides apply to the run's config, e.g.
--data.path other_features.bin (another feature file) or --eval.batches 20.

Options:
  --run-dir DIR      the run folder (holds config.toml and the checkpoints)
  --checkpoint PATH  a checkpoint folder (default: the run's newest, checkpoint/ or
                     checkpoints/latest, by step)
  --split NAME       the held-out split to read (data.val_split): validation, test, or
                     unseen-voice (speech; other data formats hold out one split and
                     refuse the others)
  --json             print one JSON object: checkpoint, step, split, val_loss,
                     val_<measure> ..., examples
  -h, --help         this text
)";

nlohmann::json evaluation_json(const CheckpointEvaluation& evaluation, const Config& config) {
  nlohmann::json out = {{"checkpoint", evaluation.checkpoint},
                        {"step", evaluation.step},
                        {"split", config.data.val_split},
                        {"batches", config.eval.batches},
                        {"rows", config.train.batch_size},
                        {"val_loss", evaluation.validation.loss}};
  for (const auto& [name, value] : evaluation.validation.measures) out["val_" + name] = value;
  out["examples"] = evaluation.examples;
  return out;
}

void print_evaluation(const CheckpointEvaluation& evaluation, const Config& config) {
  fmt::print("checkpoint {} (step {})\ndata {}, split {}: {} batches of {} rows\n",
             evaluation.checkpoint, evaluation.step, evaluation.data, config.data.val_split,
             config.eval.batches, config.train.batch_size);
  std::string measures;
  for (const auto& [name, value] : evaluation.validation.measures) {
    measures += fmt::format(", {} {:.4f}", name, value);
  }
  fmt::print("validation loss {:.6f}{}\n", evaluation.validation.loss, measures);
  if (!evaluation.examples.empty()) fmt::print("\n--- examples ---\n{}", evaluation.examples);
}

void run_evaluate(const std::vector<std::string>& args) {
  const auto arguments = parse_config_arguments(args, {"--run-dir", "--checkpoint", "--split"}, {"--json"});
  const auto run_dir = arguments.options.find("--run-dir");
  if (run_dir == arguments.options.end()) fail("evaluate needs --run-dir DIR (a run folder)");
  auto overridden = arguments;
  const auto split = arguments.options.find("--split");
  if (split != arguments.options.end()) overridden.overrides.emplace_back("data.val_split", split->second);
  const Config config = run_folder_config(overridden, run_dir->second, "evaluate");
  const auto given = arguments.options.find("--checkpoint");
  const std::string checkpoint =
      given != arguments.options.end() ? given->second : newest_checkpoint(run_dir->second);
  // As training checks it (the run trained here): an absurd --train.batch_size is refused, not
  // allocated until the kernel kills the process without a word.
  check_run_fits_machine(config, PIPETRAIN_SOURCE_DIR, ProcessesHere{});
  configure_compute_threads(config.train.threads);
  // Progress on stderr (in place on a terminal, else every tenth of the batches), not with --json.
  std::optional<ProgressLine> progress;
  if (!has_flag(arguments, "--json")) progress.emplace(config.eval.batches, config.eval.batches / 10, stderr, "batch");
  const auto start = std::chrono::steady_clock::now();
  const auto after_batch = [&](int64_t done, int64_t total) {
    if (!progress) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress->update(done, fmt::format("validating {} of {} batches", done, total), seconds / double(done));
    if (done == total) progress->finish();
  };
  const auto evaluation = evaluate_checkpoint(config, checkpoint, PIPETRAIN_SOURCE_DIR, after_batch);
  if (has_flag(arguments, "--json")) {
    fmt::print("{}\n", evaluation_json(evaluation, config).dump());
  } else {
    print_evaluation(evaluation, config);
  }
}

}  // namespace

void add_evaluate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("evaluate", "Validate a run's checkpoint on a held-out split");
  cmd->prefix_command();  // we parse `--section.field VALUE` ourselves
  cmd->set_help_flag();
  cmd->callback([cmd] {
    const auto args = cmd->remaining();
    for (const auto& arg : args) {
      if (arg == "-h" || arg == "--help") return void(fmt::print("{}", kEvaluateUsage));
    }
    run_evaluate(args);
  });
}

}  // namespace pipetrain::cli
