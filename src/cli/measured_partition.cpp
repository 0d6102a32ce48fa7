#include "cli/measured_partition.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/machine.h"
#include "model/model.h"
#include "model/registry.h"
#include "plan/profile_json.h"
#include "profile/layer_profile.h"
#include "runtime/partition.h"
#include "runtime/pipeline.h"
#include "runtime/run_spec.h"
#include "schedule/catalogue.h"

namespace pipetrain::cli {

void resolve_measured_partition(Config& config, std::vector<std::string>& worker_args) {
  auto& p = config.pipeline;
  const int64_t stages = p.stages * p.chunks;
  if (p.partition != "measured" || stages < 2 || !runtime::runs_on_pipeline_workers(config) ||
      runtime::started_as_worker()) {
    return;
  }
  if (p.nnodes > 1) {
    fail("pipeline.partition = \"measured\" with pipeline.nnodes = {}: each node would time its "
         "own layers and cut them differently; measure once (pipetrain profile, then plan "
         "--profile) and give every node the counts", p.nnodes);
  }
  // More stages than layers: the run spec's check says so, without a measurement first.
  if (stages > make_model(config)->layer_count()) return;
  const int64_t workers = p.stages * p.dp_width;
  profile::ProfileOptions options;
  options.microbatch_sizes = {runtime::microbatch_rows_of(config)};
  options.repeats = 3;
  options.threads = int(worker_compute_threads(config.train.threads, /*bound=*/false, workers));
  fmt::print(stderr, "pipetrain: pipeline.partition = \"measured\": timing the model's layers at "
             "{} rows a microbatch, {} thread(s)\n", options.microbatch_sizes[0], options.threads);
  const plan::ModelProfile measured = profile::profile_model_layers(config, options, nullptr);
  const auto costs = plan::layer_costs(measured, options.microbatch_sizes[0]);
  const auto counts =
      runtime::balanced_layer_counts(costs, stages, schedule::runtime_schedule(p.schedule, ""));
  std::vector<std::string> times;
  for (const auto& layer : costs) {
    times.push_back(fmt::format("{:.2f}", 1e3 * (layer.forward_s + layer.backward_s)));
  }
  p.partition = fmt::format("{}", fmt::join(counts, ","));
  fmt::print(stderr, "pipetrain: layer forward+backward ms: {} -> partition {}\n",
             fmt::join(times, " "), p.partition);
  worker_args.insert(worker_args.end(), {"--pipeline.partition", p.partition});
}

}  // namespace pipetrain::cli
