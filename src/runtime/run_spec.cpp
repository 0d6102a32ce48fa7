#include "runtime/run_spec.h"

#include <algorithm>

#include "core/error.h"
#include "core/text.h"
#include "device/placement.h"
#include "model/registry.h"

namespace pipetrain::runtime {
namespace {

// The schedules the runtime runs that pass `keep`, for an error that names them.
std::vector<std::string> runtime_schedules_where(
    const std::function<bool(const schedule::ScheduleEntry&)>& keep) {
  return schedule::schedule_names_where([&](const auto& e) { return e.runtime.runs && keep(e); });
}

std::string quoted_alternatives(const std::vector<std::string>& names) {  // "a" or "b"
  std::vector<std::string> quoted;
  for (const auto& name : names) quoted.push_back(fmt::format("\"{}\"", name));
  return join(quoted, " or ");
}

// One process holds every layer: recomputation or a partition into several stages would be
// silently ignored.
void check_single_process(const Config& config, const Model& model) {
  const auto& p = config.pipeline;
  if (p.recompute != "none") {
    fail("pipeline.recompute needs a pipeline run (pipeline.stages >= 2); the single-process "
         "trainer keeps every activation");
  }
  const auto counts = std::count(p.partition.begin(), p.partition.end(), ',') + 1;
  if (p.partition != "balanced" && counts > 1) {
    fail("pipeline.partition '{}' splits the {} layers over {} stages, but pipeline.stages is 1 "
         "(one process holds every layer): give --stages {}, or --partition balanced",
         p.partition, model.layer_count(), counts, counts);
  }
}

// Token slices and model chunks need a schedule that takes them; one worker cannot loop chunks.
void check_slices_and_chunks(const Config& config, const RunSpec& spec) {
  const auto& p = config.pipeline;
  const schedule::ScheduleEntry& entry = *spec.schedule;
  if (spec.slices.count() > 1 && !entry.parameters.slices) {
    fail("pipeline.slices = \"{}\" (token slicing) needs pipeline.schedule = {} (got '{}')", p.slices,
         quoted_alternatives(runtime_schedules_where([](const auto& e) { return e.parameters.slices; })),
         p.schedule);
  }
  if (p.chunks > 1 && !entry.parameters.chunks) {
    fail("pipeline.chunks = {} needs pipeline.schedule = {} (got '{}')", p.chunks,
         quoted_alternatives(runtime_schedules_where([](const auto& e) { return e.parameters.chunks; })),
         p.schedule);
  }
  if (p.chunks > 1 && p.stages == 1) {
    fail("pipeline.chunks > 1 needs pipeline.stages >= 2 (one worker holding every chunk is the "
         "1f1b schedule on one stage)");
  }
}

void check_batch_split(const Config& config) {
  const int64_t per_step = config.pipeline.dp_width * config.train.microbatches;
  if (config.train.batch_size % per_step != 0) {
    fail("train.batch_size ({}) must be a multiple of pipeline.dp_width x train.microbatches ({}): "
         "each replica takes batch_size / dp_width rows in equal microbatches",
         config.train.batch_size, per_step);
  }
}

// Replicas, ZeRO-1 and recomputation run with the schedules the catalogue says they do.
void check_runtime_support(const Config& config, const schedule::ScheduleEntry& entry) {
  const auto& p = config.pipeline;
  if (p.dp_width > 1 && !entry.runtime.data_parallel) {
    fail("pipeline.schedule '{}' runs without data parallelism (pipeline.dp_width = 1); with "
         "replicas the runtime runs {}", p.schedule,
         join(runtime_schedules_where([](const auto& e) { return e.runtime.data_parallel; }), ", "));
  }
  if (p.zero1 == 1 && !entry.runtime.zero1) {
    fail("pipeline.zero1 = 1 runs with the schedules {} only; pipeline.schedule '{}' extrapolates "
         "its weights with the optimizer's state, of which ZeRO-1 keeps a shard per replica",
         join(runtime_schedules_where([](const auto& e) { return e.runtime.zero1; }), ", "),
         p.schedule);
  }
  if (p.recompute != "none" && !entry.runtime.recompute) {
    fail("pipeline.recompute runs with the schedules {} only; pipeline.schedule is '{}'",
         join(runtime_schedules_where([](const auto& e) { return e.runtime.recompute; }), ", "),
         p.schedule);
  }
}

// Our launcher's share of the workers: nnodes equal blocks of consecutive ranks.
void check_nodes(const PipelineConfig& p) {
  const int64_t world = p.stages * p.dp_width;
  if (p.node_rank >= p.nnodes) fail("pipeline.node_rank {} outside 0..{}", p.node_rank, p.nnodes - 1);
  if (world % p.nnodes != 0) {
    fail("pipeline.nnodes {} must divide the {} workers (pipeline.stages x pipeline.dp_width)",
         p.nnodes, world);
  }
  if (p.nnodes > 1 && p.master_port == 0) {
    fail("several nodes need a fixed rendezvous port: --master-port PORT (the same on every node)");
  }
}

schedule::ScheduleSpec schedule_spec_of(const Config& config, const RunSpec& spec) {
  schedule::ScheduleSpec s;
  s.name = config.pipeline.schedule;
  s.stages = spec.layout.workers;
  s.microbatches = int(config.train.microbatches);
  s.chunks = spec.layout.chunks;
  s.dp_width = spec.layout.replicas;
  s.slices = spec.slices.count();
  if (!spec.schedule->flushes()) s.iterations = int(config.train.steps);  // one list for the run
  s.sync_iterations = int(config.pipeline.sync_warmup_steps);
  return s;
}

// The checks of a run on pipeline workers, in the order a user meets them.
void check_pipeline_run(const Config& config, const Model& model, RunSpec& spec) {
  check_slices_and_chunks(config, spec);
  check_batch_split(config);
  spec.recompute = recomputed_stages(config.pipeline.recompute, spec.layout.stages());
  check_runtime_support(config, *spec.schedule);
  spec.schedule_spec = schedule_spec_of(config, spec);
  spec.lists = std::make_shared<const schedule::StepLists>(spec.schedule_spec);  // (its refusals)
  if (spec.slices.count() > 1 && model.sliceable_length() == 0) {
    fail("pipeline.slices: model.kind '{}' cannot run token slices", model.kind());
  }
  check_nodes(config.pipeline);
}

}  // namespace

bool runs_on_pipeline_workers(const Config& config) {
  const auto& p = config.pipeline;
  // Token slicing and the no-flush weight policies run on the pipeline runtime even on one
  // stage (one worker process): the single-process trainer knows only synchronous training.
  return p.stages * p.dp_width * p.chunks > 1 ||
         parse_token_slices(p.slices, config.model.seq_len).count() > 1 ||
         schedule::runtime_schedule(p.schedule, "").rule != "sync";
}

int64_t microbatch_rows_of(const Config& config) {
  return std::max<int64_t>(1, config.train.batch_size /
                                  (config.train.microbatches * config.pipeline.dp_width));
}

RunSpec make_run_spec(const Config& config) {
  const auto& p = config.pipeline;
  RunSpec spec;
  spec.schedule = &schedule::runtime_schedule(p.schedule, "");
  spec.slices = parse_token_slices(p.slices, config.model.seq_len);
  spec.layout = Layout::of(config, 0, spec.schedule->placement());
  spec.pipelined = runs_on_pipeline_workers(config);
  const auto model = make_model(config);
  if (!spec.pipelined) check_single_process(config, *model);
  spec.microbatch_rows = microbatch_rows_of(config);
  spec.ranges = stage_ranges(*model, p, spec.microbatch_rows, *spec.schedule);
  const int64_t workers = spec.pipelined ? p.stages * p.dp_width : 1;
  const int64_t nodes = std::max<int64_t>(1, p.nnodes);
  spec.execution = device::with_cuda_graphs(
      device::decide_execution_here(config.train.device, config.model.dtype,
                                    int((workers + nodes - 1) / nodes)),
      config.train.cuda_graphs);
  if (spec.pipelined) {
    check_pipeline_run(config, *model, spec);
  } else {
    if (spec.execution.graphs == device::Graphs::Emulated) {
      fail("train.cuda_graphs = 2 emulates pipeline workers' graphs; the single process "
           "(pipeline.stages = 1) has none: use 0, or 1 on a GPU");
    }
    spec.recompute.assign(spec.ranges.size(), false);
    spec.schedule_spec = schedule_spec_of(config, spec);
  }
  return spec;
}

}  // namespace pipetrain::runtime
