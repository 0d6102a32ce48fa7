#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/measured_partition.h"
#include "cli/plan_check.h"
#include "cli/preflight.h"
#include "core/error.h"
#include "core/machine.h"
#include "core/terminal_text.h"
#include "core/files.h"
#include "core/text.h"
#include "io/json_file.h"
#include "io/run_folder.h"
#include "plan/plan_file.h"
#include "runtime/pipeline.h"
#include "runtime/run_spec.h"
#include "schedule/catalogue.h"
#include "train/run.h"

namespace pipetrain::cli {
namespace {

// {schedules} and {chunked} come from the schedule catalogue.
constexpr const char* kTrainUsage = R"(Usage: pipetrain train [CONFIG.toml] [--section.field VALUE ...] [options]

Trains the configured model (model.kind, docs/models.md). With no arguments:
the embedded default (byte-level GPT on data/tinyshakespeare.txt, a few
minutes on 2 cores). Any config field can be
overridden, e.g. --model.layers 8 --train.steps 200 (see docs/config.md).

Pipeline shorthands (see docs/config.md, [pipeline]):
  --stages P          pipeline stages, one worker process each (pipeline.stages)
  --schedule NAME     pipeline.schedule, one of (see docs/schedules.md):
{schedules}
  --microbatches M    microbatches per step (train.microbatches)
  --dp-width W        data-parallel replicas, W x P workers (pipeline.dp_width)
  --chunks V          model chunks per worker, {chunked} only (pipeline.chunks)
  --partition LIST    layer counts per stage, e.g. 3,3; balanced; or measured (by timed
                      layers) (pipeline.partition)
  --plan FILE         run a plan from `pipetrain plan --out FILE`: its model shape,
                      stages, width, microbatching, schedule, partition, recomputation;
                      the run ends with the plan's predictions beside what it measured
  --zero1             ZeRO-1: shard optimizer state over the replicas (pipeline.zero1 = 1)
With --stages > 1 pipetrain spawns the workers itself; under torchrun (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT set) each process is one worker.
Several machines: run the same command on each with
  --nnodes N --node-rank K --master-addr NODE0_ADDR --master-port PORT
(node K runs ranks K*R .. K*R+R-1 of the R*N workers; node 0 hosts the rendezvous;
GLOO_SOCKET_IFNAME picks the network interface, as in PyTorch).

Options:
  --run-dir DIR   run folder (default: runs/run-<date>-<time>)
  --overwrite     reuse a run folder that already holds a run: the previous run's
                  checkpoints, metrics and other outputs are removed first
  --resume DIR    continue run folder DIR from its latest checkpoint (DIR/checkpoints/latest),
                  with DIR/config.toml plus any overrides given (e.g. --train.steps, --stages)
  --quiet         no live progress line
  -h, --help      this text
)";

// The schedules the runtime runs, wrapped under the usage's option descriptions.
std::string runtime_schedule_lines() {
  constexpr size_t kIndent = 22, kWidth = 80;
  const auto names = schedule::schedule_names_where([](const auto& e) { return e.runtime.runs; });
  std::string out, line;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string word = names[i] + (i + 1 < names.size() ? "," : "");
    if (!line.empty() && kIndent + line.size() + 1 + word.size() > kWidth) {
      out += std::string(kIndent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + std::string(kIndent, ' ') + line;
}

std::string train_usage() {
  const auto chunked = schedule::schedule_names_where(
      [](const auto& e) { return e.runtime.runs && e.parameters.chunks; });
  return fmt::format(fmt::runtime(kTrainUsage), fmt::arg("schedules", runtime_schedule_lines()),
                     fmt::arg("chunked", join(chunked, ", ")));
}

// The plan a run was given (`--plan`), read once at the start: the run's end keeps it in the
// run folder and compares with it, whatever became of the file (the user's, in that folder or not).
struct GivenPlan {
  std::string path;
  nlohmann::json plan;
  std::vector<std::string> overridden;  // the plan's fields the run changed (plan_fields_overridden)
};

// Whether `args` from `from` on set `field` ("--pipeline.stages VALUE" or "--pipeline.stages=VALUE").
bool sets_field(const std::vector<std::string>& args, size_t from, const std::string& field) {
  for (size_t i = from; i < args.size(); ++i) {
    if (args[i] == field || args[i].rfind(field + "=", 0) == 0) return true;
  }
  return false;
}

// `--plan plan.json` -> the plan's `--section.field VALUE` pairs, in its place: fields given
// after it still override it; the plan's partition then goes with its stages (its layer counts
// cut the layers for the plan's depth: another depth or chunk count cuts its own, balanced).
// `given`: the plan (the last, given several).
std::vector<std::string> expand_plan(const std::vector<std::string>& args, GivenPlan* given) {
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (args[i] == "--plan") {
      if (i + 1 == args.size()) fail("--plan needs a plan file (from `pipetrain plan --out`)");
      path = args[++i];
    } else if (args[i].rfind("--plan=", 0) == 0) {
      path = args[i].substr(7);
    } else {
      out.push_back(args[i]);
      continue;
    }
    *given = {path, parse_json_file(path), {}};
    const bool depth_changed = (sets_field(args, i + 1, "--pipeline.stages") || sets_field(args, i + 1, "--pipeline.chunks")) &&
                               !sets_field(args, i + 1, "--pipeline.partition");
    for (const auto& [key, value] : plan::plan_config_overrides(given->plan, path)) {
      if (key == "pipeline.partition" && depth_changed) continue;
      out.push_back("--" + key);
      out.push_back(value);
    }
  }
  return out;
}

void report(const RunSummary& summary, const RunOptions& options, const GivenPlan& given);

// `--resume DIR`: the run's own config.toml is the base the overrides apply to.
void use_resumed_config(ConfigArguments& arguments, const std::string& dir) {
  if (!arguments.config_path.empty()) {
    fail("--resume {} takes the run's own config ({}/config.toml); give overrides instead of "
         "the config file '{}'", dir, dir, arguments.config_path);
  }
  if (arguments.options.count("--run-dir") != 0) fail("--resume DIR continues DIR: leave out --run-dir");
  require_folder(dir, "run folder", "config.toml and checkpoints/", "--resume: ");
  arguments.config_path = dir + "/config.toml";
  if (!std::filesystem::exists(arguments.config_path)) {
    fail("--resume: '{}' is not a run folder (no config.toml)", dir);
  }
  weights_from_checkpoint(arguments);
}

// Our launcher spawns its node's share of the workers; under torchrun this process is one of
// LOCAL_WORLD_SIZE workers on its machine.
ProcessesHere processes_here(const Config& config) {
  ProcessesHere here;
  if (!runtime::runs_on_pipeline_workers(config)) return here;
  const auto& p = config.pipeline;
  here.launcher = !runtime::started_as_worker();
  const char* local_world = std::getenv("LOCAL_WORLD_SIZE");
  const auto local = parse_int(local_world != nullptr ? local_world : "");
  here.workers = here.launcher ? double(p.stages) * double(p.dp_width) / double(p.nnodes)
                               : double(local && *local > 0 ? *local : 1);
  return here;
}

// The worker's launch file our launcher named (runtime/pipeline.h); "" when none.
std::string launch_file_of(const ConfigArguments& arguments) {
  const auto file = arguments.options.find(runtime::kLaunchFileOption);
  if (file == arguments.options.end()) return "";
  if (!runtime::started_as_worker()) {
    fail("{} is for the workers pipetrain's launcher starts (RANK set)", runtime::kLaunchFileOption);
  }
  return file->second;
}

void run_train(const std::vector<std::string>& raw_args) {
  GivenPlan given;
  const auto args = expand_plan(expand_pipeline_shorthands(raw_args), &given);
  auto arguments = parse_config_arguments(args, {"--run-dir", "--resume", runtime::kLaunchFileOption},
                                          {"--overwrite", "--quiet"});
  const std::string launch_file = launch_file_of(arguments);
  RunOptions options;
  const auto resume = arguments.options.find("--resume");
  options.resume = resume != arguments.options.end();
  if (options.resume && has_flag(arguments, "--overwrite")) {
    fail("--resume continues the run in {} and --overwrite would remove it: give one of them", resume->second);
  }
  if (options.resume) use_resumed_config(arguments, resume->second);
  Config config = resolve_config(arguments);
  if (!given.path.empty()) {
    require_plan_for_model(given.plan, given.path, config);
    given.overridden = plan_fields_overridden(given.plan, given.path, config);
  }
  if (config.pipeline.memory_budget_mb > 0) return_freed_memory_to_system();
  const auto run_dir = arguments.options.find("--run-dir");
  options.run_dir = options.resume                         ? resume->second
                    : run_dir != arguments.options.end() ? run_dir->second
                                                         : new_run_dir_name("runs");
  options.overwrite = has_flag(arguments, "--overwrite");
  options.progress = !has_flag(arguments, "--quiet");
  options.data_root = PIPETRAIN_SOURCE_DIR;  // so data/... works from any folder
  // Before the model is built: an absurd size is refused, not allocated.
  check_run_fits_machine(config, options.data_root, processes_here(config));
  std::vector<std::string> worker_args = raw_args;
  resolve_measured_partition(config, worker_args);  // before the spec: it cuts the layers
  const runtime::RunSpec spec = runtime::make_run_spec(config);  // every cross-field check
  if (spec.pipelined) {
    const auto pipeline_summary =
        runtime::run_pipeline(config, spec, options, worker_args, launch_file);
    if (!pipeline_summary) return;  // a worker: the launcher or the last stage reports
    report(*pipeline_summary, options, given);
    return;
  }
  report(run_training(config, options), options, given);
}

// The sample as a terminal can show it; sample.txt keeps the bytes as generated.
void print_sample(const std::string& sample, const std::string& run_dir) {
  const TerminalText shown = terminal_text(sample);
  fmt::print("\n--- sample ---\n{}\n--------------\n", shown.text);
  if (shown.escaped_bytes > 0) {
    fmt::print("({} of its bytes shown as \\xNN: control characters or not UTF-8; {} holds them as "
               "generated)\n", shown.escaped_bytes, (std::filesystem::path(run_dir) / "sample.txt").string());
  }
}

void report(const RunSummary& summary, const RunOptions& options, const GivenPlan& given) {
  if (!summary.reported_here) {
    fmt::print("done: this node's workers finished; metrics, checkpoint and sample are in the run "
               "folder of the node holding the last stage\n");
    return;
  }
  if (!summary.sample.empty()) print_sample(summary.sample, options.run_dir);
  std::string measures;
  for (const auto& [name, value] : summary.final_val_measures) measures += fmt::format(", {} {:.4f}", name, value);
  fmt::print("done: {} steps in {:.0f} s, {:.0f} {}/s, final loss {:.4f}, validation loss {:.4f}{}\n",
             summary.steps, summary.seconds, summary.tokens_per_s, summary.throughput_unit, summary.final_loss,
             summary.final_val_loss, measures);
  fmt::print("{}", summary.memory);  // per worker, pipeline runs only
  if (!given.path.empty()) {  // the plan beside what it planned, and how it held
    write_file_atomically(options.run_dir + "/plan.json", given.plan.dump(2) + "\n");
    fmt::print("{}", plan_check(given.plan, given.path, options.run_dir, given.overridden));
  }
  fmt::print("run folder: {} ({})\n", options.run_dir, run_folder_outputs(options.run_dir));
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model (default: GPT on tinyshakespeare)");
  cmd->prefix_command();  // we parse `--section.field VALUE` ourselves
  cmd->set_help_flag();
  cmd->callback([cmd] {
    const auto args = cmd->remaining();
    for (const auto& arg : args) {
      if (arg == "-h" || arg == "--help") return void(fmt::print("{}", train_usage()));
    }
    run_train(args);
  });
}

}  // namespace pipetrain::cli
