// `pipetrain export`: a run's checkpoint in another tool's format (Hugging Face's).
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "core/config.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "train/checkpoint_evaluation.h"
#include "train/hf_export.h"

namespace pipetrain::cli {
namespace {

constexpr const char* kExportUsage = R"(Usage: pipetrain export --run-dir DIR --format hf --out OUT [--checkpoint PATH]
                        [--dtype NAME] [--shard-mb N]
Writes a run's checkpoint (single-process or pipeline) as a Hugging Face checkpoint folder:
config.json and model.safetensors (model-0000i-of-0000n.safetensors and
model.safetensors.index.json above --shard-mb), which transformers' from_pretrained loads
(model.kind gpt: GPT2LMHeadModel; llama: LlamaForCausalLM). docs/models.md.
Options:
  --run-dir DIR      the run folder (holds config.toml and the checkpoints)
  --format hf        the format written (Hugging Face's is the one there is)
  --out OUT          the folder to write: new, or empty
  --checkpoint PATH  a checkpoint folder (default: the run's newest)
  --dtype NAME       float32, float64, bfloat16 or float16 (default: the weights' own dtype)
  --shard-mb N       the most megabytes of tensors per file (default 5000, transformers')
  -h, --help         this text
)";

std::string required(const ConfigArguments& arguments, const std::string& option) {
  const auto found = arguments.options.find(option);
  if (found == arguments.options.end()) fail("export needs {} (pipetrain export --help)", option);
  return found->second;
}

void run_export(const std::vector<std::string>& args) {
  auto arguments = parse_config_arguments(
      args, {"--run-dir", "--format", "--out", "--checkpoint", "--dtype", "--shard-mb"}, {});
  const std::string run_dir = required(arguments, "--run-dir");
  const std::string format = required(arguments, "--format");
  if (format != "hf") fail("export: --format must be hf (Hugging Face), got '{}'", format);
  HfExportOptions options;
  options.out_dir = required(arguments, "--out");
  const auto given = arguments.options.find("--checkpoint");
  options.checkpoint_dir = given != arguments.options.end() ? given->second : newest_checkpoint(run_dir);
  if (const auto dtype = arguments.options.find("--dtype"); dtype != arguments.options.end()) {
    options.dtype = dtype->second;
  }
  if (const auto shard = arguments.options.find("--shard-mb"); shard != arguments.options.end()) {
    const auto megabytes = parse_double(shard->second);
    if (!megabytes || !(*megabytes > 0) || *megabytes > 1e9) {
      fail("export: --shard-mb must be a positive number of megabytes, got '{}'", shard->second);
    }
    options.shard_bytes = uint64_t(*megabytes * 1e6);
  }
  const Config config = run_folder_config(arguments, run_dir, "export");
  options.started_from = parse_config_toml(read_file(run_dir + "/config.toml"), run_dir + "/config.toml").model.init_from;
  const auto files = export_hf(config, options);
  fmt::print("exported {} (step {}) to {}: {}\n", options.checkpoint_dir,
             checkpoint_step(options.checkpoint_dir), options.out_dir, join(files, ", "));
  if (options.started_from.empty()) return;
  if (!std::filesystem::is_directory(options.started_from)) {
    fmt::print("export: the run started from {}, which is gone: its special-token ids (bos, eos) are not "
               "in the export's config.json, nor its tokenizer files beside it; copy them from the original\n",
               options.started_from);
  } else if (!std::filesystem::exists(options.started_from + "/config.json")) {
    fmt::print("export: the run started from {}, whose config.json is gone: its special-token ids (bos, eos) "
               "are not in the export's config.json; copy them from the original\n", options.started_from);
  }
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("export", "Write a run's checkpoint as a Hugging Face checkpoint");
  cmd->prefix_command();  // we parse `--section.field VALUE` ourselves
  cmd->set_help_flag();
  cmd->callback([cmd] {
    const auto args = cmd->remaining();
    for (const auto& arg : args) {
      if (arg == "-h" || arg == "--help") return void(fmt::print("{}", kExportUsage));
    }
    run_export(args);
  });
}

}  // namespace pipetrain::cli
