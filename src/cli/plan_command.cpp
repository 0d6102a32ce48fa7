#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/arguments.h"
#include "cli/clusters.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "io/json_file.h"
#include "model/registry.h"
#include "plan/plan_report.h"
#include "plan/planner.h"
#include "runtime/model_costs.h"
#include "runtime/partition.h"
#include "runtime/run_spec.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "sim/timeline.h"

namespace pipetrain::cli {

namespace {

std::vector<std::string> planned_schedules() {
  return schedule::schedule_names_where([](const schedule::ScheduleEntry& e) { return e.planner.plans; });
}

// The run config's model as the planner sees it when it runs here: its costs at one worker's
// rate (the balance's cost model, runtime::model_layer_costs, at the cluster's sustained rate)
// and the runtime's memory; `fields` are what the config differs in from the user's.
plan::PlanRequest::ModelVariant model_variant(std::string label, const Config& config,
                                              std::vector<std::pair<std::string, std::string>> fields,
                                              const plan::ClusterSpec& cluster) {
  std::shared_ptr<const Model> model = make_model(config);
  const runtime::ModelCostOptions options = runtime::model_cost_options(config, cluster);
  plan::PlanRequest::ModelVariant variant;
  variant.label = std::move(label);
  variant.config_fields = std::move(fields);
  variant.costs = [model, options](int64_t microbatch) {
    return runtime::model_plan_costs(*model, microbatch, options);
  };
  return variant;
}

// A model whose training depends on the microbatch size (BatchNorm) is planned at the run's own
// microbatch: another one would train another model.
void keep_microbatch(int64_t microbatch, const std::string& dependence, int64_t global_batch,
                     plan::PlanRequest& request) {
  if (global_batch % microbatch != 0) {
    fail("plan: --global-batch {} is not a multiple of the run's microbatch of {} samples, which "
         "the plan keeps: {}", global_batch, microbatch, dependence);
  }
  request.microbatch_sizes = {microbatch};
  fmt::print("plan: the microbatch stays {} samples, the run's: {} (another size would train "
             "another model)\n", microbatch, dependence);
}

void keep_microbatch_if_it_trains_the_model(const Config& config, int64_t global_batch,
                                            plan::PlanRequest& request) {
  const std::string dependence = make_model(config)->microbatch_dependence();
  if (!dependence.empty()) keep_microbatch(runtime::microbatch_rows_of(config), dependence, global_batch, request);
}

double held_bytes(const plan::PlanRequest::ModelVariant& variant) {
  double bytes = 0;
  for (const auto& layer : variant.costs(1)) bytes += layer.activation_bytes + layer.workspace_bytes;
  return bytes;
}

// The config as given and, when it changes the model's memory, with chunked cross-entropy
// (the planner chooses). Each carries the command line's `overrides` into the plan file, so
// `train RUN.toml --plan plan.json` runs the model that was planned.
std::vector<plan::PlanRequest::ModelVariant> model_variants(
    const Config& config, const plan::ClusterSpec& cluster,
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  constexpr int64_t kLossChunkTokens = 1024;
  std::vector<plan::PlanRequest::ModelVariant> variants = {
      model_variant("as configured", config, overrides, cluster)};
  if (config.model.loss_chunk_tokens == 0) {
    Config chunked = config;
    chunked.model.loss_chunk_tokens = kLossChunkTokens;
    auto fields = overrides;
    fields.emplace_back("model.loss_chunk_tokens", std::to_string(kLossChunkTokens));
    auto variant = model_variant("chunked CE", chunked, fields, cluster);
    // A model without a chunked loss holds the same either way: no second variant.
    if (held_bytes(variant) != held_bytes(variants.front())) variants.push_back(std::move(variant));
  }
  return variants;
}

// The best plan's memory on its simulated timeline, tensors only (as a run's trace.json has
// it): the simulator's held bytes per action, raised on each worker so its highest is the plan's
// predicted worker memory less the cluster's per-worker overhead.
void add_predicted_memory(sim::Timeline& timeline, const schedule::Schedule& s,
                          const sim::SimResult& simulated, const plan::PlanCandidate& best,
                          double overhead_bytes) {
  std::vector<std::vector<sim::HeldDuring>> held;
  std::vector<double> base;
  for (int w = 0; w < s.workers; ++w) {
    held.push_back(sim::held_during_actions(s, best.costs, w, simulated));
    double highest = 0;
    for (const auto& action : held.back()) highest = std::max(highest, action.peak);
    base.push_back(best.worker_memory_bytes.at(size_t(w)) - overhead_bytes - highest);
  }
  sim::add_simulated_memory(timeline, held, base);
}

// What `plan` was given (static: CLI11 writes into it after add_plan_command returns).
struct PlanArguments {
  std::string model = "gpt-3.9b", cluster = "p3-16xlarge-x8", profile, config_path, schedules;
  int64_t global_batch = 256;
  std::string memory_per_worker;
  int max_workers = 8;
  int top = 10;
  std::string out, out_ranked, svg, trace;
  std::vector<std::string> notes;  // said with the plans (not before a refusal: one line)
};

// --config RUN.toml [--section.field VALUE ...]: the run config's model, planned from its own
// layer costs for this runtime; `overrides` are carried into the plan file.
Config plan_run_config(const CLI::App& cmd, PlanArguments& args, plan::PlanRequest& request,
                       std::vector<std::pair<std::string, std::string>>& overrides) {
  if (cmd.get_option("--model")->count() > 0 || !args.profile.empty()) {
    fail("plan: --config plans the config's model; give it without --model or --profile");
  }
  ConfigArguments arguments = parse_config_arguments(cmd.remaining(), {}, {});
  if (!arguments.config_path.empty()) {
    fail("plan: unexpected argument '{}' (the config is --config {})", arguments.config_path, args.config_path);
  }
  arguments.config_path = args.config_path;
  Config config = resolve_config(arguments);
  overrides = arguments.overrides;  // (what the plan decides wins over them: plan_file.cpp)
  request.model = plan::GptShape{};  // layers = 0: planned from its own layer costs
  request.model.name = config.model.preset.empty() ? config.model.kind : config.model.preset;
  request.model_kind = config.model.kind;
  request.for_pipetrain_runtime = true;  // a plan for this run config
  request.cuda_graphs = config.train.cuda_graphs == 1;  // (emulated: no pools)
  if (cmd.get_option("--global-batch")->count() == 0) args.global_batch = config.train.batch_size;
  return config;
}

// --profile FILE: measured layer costs, at the microbatch sizes the profile measured (the run's
// own only, for a model it trains).
void plan_from_profile(const std::string& profile, int64_t global_batch, plan::PlanRequest& request) {
  request.profile = plan::model_profile_from_json(parse_json_file(profile), profile);
  request.model = request.profile->shape;
  request.model_kind = request.profile->model_kind;
  request.for_pipetrain_runtime = true;  // a plan to run here
  request.microbatch_sizes.clear();
  for (const auto& m : request.profile->layers.front().by_microbatch) {
    request.microbatch_sizes.push_back(m.microbatch);
  }
  if (request.profile->fixed_microbatch > 0) {
    keep_microbatch(request.profile->fixed_microbatch, request.profile->microbatch_dependence, global_batch, request);
  }
  // The profile's links are between this machine's processes: a plan for this machine takes
  // them, a plan for another cluster its own file's (NVLink is not loopback Gloo).
  if (request.profile->links.measured && request.cluster.name != "this-machine") {
    fmt::print("plan: links from cluster {} (the profile's were measured between this machine's processes); "
               "layer times from the profile ({})\n", request.cluster.name, request.profile->description);
  } else if (request.profile->links.measured) {
    plan::use_measured_links(request.cluster, request.profile->links);
    const auto& links = request.profile->links;
    fmt::print("links from the profile: p2p {:.0f} us + {:.2f} GB/s, all-reduce {:.0f} us + {:.2f} GB/s\n",
               1e6 * links.p2p.latency_s, links.p2p.bandwidth / 1e9, 1e6 * links.all_reduce.latency_s,
               links.all_reduce.bandwidth / 1e9);
  }
}

// --memory-per-worker: 1 to --max-workers workers, each under the budget, which the run then
// keeps to (pipeline.memory_budget_mb in each variant's config fields).
void plan_under_memory_budget(const PlanArguments& args, plan::PlanRequest& request) {
  const auto budget = parse_bytes(args.memory_per_worker);
  if (!budget || *budget <= 0) {
    fail("--memory-per-worker: expected a size like 2GiB or 1500MB, got '{}'", args.memory_per_worker);
  }
  request.cluster.device_memory_bytes = *budget;
  for (int workers = 1; workers <= args.max_workers; ++workers) request.worker_counts.push_back(workers);
  for (auto& variant : request.model_variants) {
    variant.config_fields.push_back({"pipeline.memory_budget_mb", fmt::format("{:.0f}", *budget / (1 << 20))});
  }
}

void set_batch_and_schedules(const PlanArguments& args, plan::PlanRequest& request) {
  // Microbatch counts are int in schedules; a larger batch would wrap around.
  if (args.global_batch > std::numeric_limits<int>::max()) {
    fail("--global-batch {} is too large: the planner takes at most {} sequences per step",
         args.global_batch, std::numeric_limits<int>::max());
  }
  request.global_batch = args.global_batch;
  if (!args.schedules.empty()) request.schedules = split(args.schedules, ',');
  for (const auto& name : request.schedules) {
    const schedule::ScheduleEntry* entry = schedule::find_schedule(name);
    if (entry == nullptr || !entry->planner.plans) {
      fail("--schedules: the planner does not plan schedule '{}' (it plans {})", name,
           join(planned_schedules(), ", "));
    }
  }
}

// A schedule whose updates train well with another optimizer than the run's (its catalogue
// recipe: 2BW's delayed updates with Muon, where AdamW ends 41% higher) is not planned for the
// run unless --schedules asks for it: a faster step of a worse training is no plan.
void leave_out_schedules_for_other_optimizers(const Config& config, plan::PlanRequest& request,
                                              std::vector<std::string>& notes) {
  if (!request.schedules.empty()) return;  // --schedules: as asked
  std::vector<std::string> kept, left_out;
  for (const auto& name : planned_schedules()) {
    const auto& recipe = schedule::schedule_entry(name).recommended;
    const bool other = !recipe.optimizer.empty() && recipe.optimizer != config.train.optimizer;
    (other ? left_out : kept).push_back(name);
    if (other) {
      notes.push_back(fmt::format("plan: {} left out: it trains well with train.optimizer {}, this run's is {} "
                                  "({}); --schedules {} plans it", name, recipe.optimizer, config.train.optimizer,
                                  recipe.evidence, name));
    }
  }
  if (!left_out.empty()) request.schedules = kept;
}

plan::PlanRequest plan_request(const CLI::App& cmd, PlanArguments& args) {
  plan::PlanRequest request;
  const auto extras = cmd.remaining();
  if (!extras.empty() && args.config_path.empty()) {
    fail("plan: unexpected argument '{}' (config overrides need --config RUN.toml)", extras.front());
  }
  if (!args.memory_per_worker.empty() && args.config_path.empty()) {
    fail("plan: --memory-per-worker plans a run config's model: give --config RUN.toml");
  }
  if (cmd.get_option("--max-workers")->count() > 0 && args.memory_per_worker.empty()) {
    fail("plan: --max-workers goes with --memory-per-worker (without it the cluster's devices are the workers)");
  }
  if (!args.profile.empty() && cmd.get_option("--model")->count() > 0) {
    fail("plan: --profile plans the profiled model; give it without --model");
  }
  for (const auto& [path, option] : {std::pair{args.out, "--out"}, std::pair{args.svg, "--svg"},
                                     std::pair{args.trace, "--trace"}}) {
    require_writable_output(path, option);
  }
  std::optional<Config> run_config;
  std::vector<std::pair<std::string, std::string>> overrides;  // of the run config
  if (!args.config_path.empty()) {
    run_config = plan_run_config(cmd, args, request, overrides);
  } else if (args.profile.empty()) {
    request.model = plan::find_gpt_shape(args.model);
    request.model_kind = "gpt";
  }
  // A run config or a profile measured here plans for this machine unless told otherwise.
  const bool planned_here = !args.config_path.empty() || !args.profile.empty();
  if (planned_here && cmd.get_option("--cluster")->count() == 0) args.cluster = "this-machine";
  request.cluster = load_cluster_option(args.cluster);
  if (!args.profile.empty()) plan_from_profile(args.profile, args.global_batch, request);
  if (run_config) {
    request.model_variants = model_variants(*run_config, request.cluster, overrides);
    keep_microbatch_if_it_trains_the_model(*run_config, args.global_batch, request);
  }
  if (!args.memory_per_worker.empty()) plan_under_memory_budget(args, request);
  set_batch_and_schedules(args, request);
  if (run_config) leave_out_schedules_for_other_optimizers(*run_config, request, args.notes);
  return request;
}

// No plan fits: one line saying what the least plan would need, or why there was no candidate.
[[noreturn]] void fail_nothing_fits(const plan::PlanRequest& request, const plan::PlanResult& result) {
  const std::string per = request.worker_counts.empty() ? "device" : "worker";
  const double least = plan::least_memory_needed(result);
  if (least > 0) {
    fail("no plan fits in {} per {}; the smallest plan needs {}", format_bytes(request.cluster.device_memory_bytes),
         per, format_bytes(least));
  }
  if (!result.infeasible.empty()) {
    fail("no plan: every candidate breaks a schedule's rules ({}: {})", result.infeasible.front().schedule,
         result.infeasible.front().rejected);
  }
  const std::string workers = request.worker_counts.empty()
                                  ? fmt::format("the {} devices of cluster {}", request.cluster.devices(), request.cluster.name)
                                  : fmt::format("{} to {} workers", request.worker_counts.front(), request.worker_counts.back());
  fail("no plan splits a global batch of {} over {} at microbatch size {} (a pipeline has at most {} "
       "stages, one per layer, and its replicas take whole microbatches); try a larger --global-batch "
       "or a smaller --cluster", request.global_batch, workers, fmt::join(request.microbatch_sizes, ", "),
       plan::planned_layer_count(request));
}

// DIR/rank-NNN.json, best first; an earlier ranking's rank files there go first, so the folder
// holds one ranking (bench/plan_choice.sh runs every rank file in it).
void write_ranked_plans(const std::string& folder, const plan::PlanRequest& request, const plan::PlanResult& result) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  if (error) fail("--out-ranked: cannot create {}: {}", folder, error.message());
  static const std::regex rank_file(R"(rank-[0-9]{3,}\.json)");
  for (const auto& entry : std::filesystem::directory_iterator(folder, error)) {
    if (entry.is_regular_file() && std::regex_match(entry.path().filename().string(), rank_file)) {
      std::filesystem::remove(entry.path(), error);
    }
  }
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    write_file_atomically(fmt::format("{}/rank-{:03}.json", folder, i + 1),
                          plan::plan_to_json(request, result.ranked[i]).dump(2) + "\n");
  }
}

// The best plan's simulated timeline (and its memory) as an SVG and/or a Chrome trace.
void write_predicted_timeline(const PlanArguments& args, const plan::PlanRequest& request,
                              const plan::PlanCandidate& best) {
  const auto s = schedule::make_schedule(best.schedule_spec);
  const sim::SimResult simulated = sim::simulate(s, best.costs);
  sim::Timeline timeline = sim::timeline_from_simulation(s, simulated);
  if (!best.worker_memory_bytes.empty()) {
    add_predicted_memory(timeline, s, simulated, best, request.cluster.worker_overhead_bytes);
  }
  timeline.title = fmt::format("predicted: {} d={} w={} b={} m={}, iteration {:.1f} ms", best.schedule,
                               best.stages, best.dp_width, best.microbatch, best.microbatches,
                               1e3 * best.iteration_s);
  if (!args.svg.empty()) write_file_atomically(args.svg, sim::render_svg(timeline));
  if (!args.trace.empty()) write_file_atomically(args.trace, sim::chrome_trace_json(timeline));
}

void run_plan(const CLI::App& cmd, PlanArguments& args) {
  const plan::PlanRequest request = plan_request(cmd, args);
  const plan::PlanResult result = plan::plan_training(request);
  if (result.ranked.empty()) fail_nothing_fits(request, result);
  for (const auto& note : args.notes) fmt::print("{}\n", note);
  fmt::print("{}", plan::format_plan_report(request, result, args.top));
  const auto& best = result.ranked.front();
  fmt::print("\nbest: {} with d={} stages x w={} replicas, microbatch {} x {} microbatches, "
             "recomputation {}, partition {}: {:.1f} samples/s predicted\n",
             best.schedule, best.stages, best.dp_width, best.microbatch, best.microbatches,
             best.recompute ? "on" : "off", fmt::join(best.partition, ","), best.samples_per_s);
  if (!args.out.empty()) write_file_atomically(args.out, plan::plan_to_json(request, best).dump(2) + "\n");
  if (!args.out_ranked.empty()) write_ranked_plans(args.out_ranked, request, result);
  if (!args.svg.empty() || !args.trace.empty()) write_predicted_timeline(args, request, best);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "plan", "Plan pipeline depth, data-parallel width, microbatch size, recomputation and "
              "schedule for a model on a cluster (analytic profile + simulator)");
  static PlanArguments args;
  std::vector<std::string> shapes;
  for (const auto& shape : plan::known_gpt_shapes()) shapes.push_back(shape.name);
  cmd->add_option("--model", args.model, join(shapes, ", "))->capture_default_str();
  cmd->add_option("--cluster", args.cluster, "a name in clusters/ or a cluster .toml path (default: this-machine "
                                            "with --config or --profile, p3-16xlarge-x8 with --model)");
  cmd->add_option("--global-batch", args.global_batch, "samples (sequences, images, utterances) per optimizer step")->capture_default_str();
  cmd->add_option("--schedules", args.schedules, "comma-separated subset of " + join(planned_schedules(), ","));
  cmd->add_option("--top", args.top, "alternatives to show")->capture_default_str()->check(at_least_one());
  cmd->add_option("--out", args.out, "write the best plan as JSON here");
  cmd->add_option("--out-ranked", args.out_ranked, "write every plan that fits as DIR/rank-NNN.json, best first "
                  "(to measure the ranking: bench/plan_choice.sh)");
  cmd->add_option("--svg", args.svg, "write the best plan's simulated timeline here (SVG)");
  cmd->add_option("--trace", args.trace, "write the best plan's simulated timeline here (Chrome trace JSON), "
                  "to set beside a real run's trace.json");
  cmd->add_option("--profile", args.profile, "measured layer costs from `pipetrain profile` (instead of --model)");
  cmd->add_option("--config", args.config_path,
                  "plan the run config's model (any model.kind) from its own analytic per-layer "
                  "costs, instead of --model; `--section.field VALUE` overrides follow it "
                  "(default cluster: this-machine, default global batch: train.batch_size)");
  cmd->add_option("--memory-per-worker", args.memory_per_worker,
                  "with --config: a memory budget per worker (\"2GiB\", \"1500MB\"); plans 1 to "
                  "--max-workers workers sharing the cluster's cores, counting each worker's "
                  "resident overhead (the cluster's worker_overhead_gb)");
  cmd->add_option("--max-workers", args.max_workers, "with --memory-per-worker: the most workers to plan for")
      ->capture_default_str()
      ->check(at_least_one());
  cmd->allow_extras();  // the config overrides
  cmd->callback([cmd] { run_plan(*cmd, args); });
}

}  // namespace pipetrain::cli
