#pragma once
// The run spec: what a config means for a training run, worked out and cross-checked once
// (make_run_spec) and then handed to everything that runs it: the train command, the launcher,
// each worker and its StageExecutor. Workers build it from the same config the same way, so a
// torchrun worker and a worker our launcher spawned hold the same spec. No libtorch.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/config.h"
#include "device/execution.h"
#include "runtime/layout.h"
#include "runtime/partition.h"
#include "runtime/token_slices.h"
#include "schedule/catalogue.h"
#include "schedule/step_lists.h"

namespace pipetrain::runtime {

struct RunSpec {
  const schedule::ScheduleEntry* schedule = nullptr;  // pipeline.schedule's catalogue entry
  // What every worker generates its action list from (for the whole run when it never flushes).
  schedule::ScheduleSpec schedule_spec;
  // Pipeline runs: the workers' steps made from it (schedule::StepLists), made once here.
  std::shared_ptr<const schedule::StepLists> lists;
  Layout layout;                   // p workers x w replicas x v chunks; rank 0 (Layout::of_rank)
  std::vector<StageRange> ranges;  // per model stage (p * v of them): the layers it holds
  TokenSlices slices;              // pipeline.slices
  std::vector<bool> recompute;     // per model stage: pipeline.recompute
  int64_t microbatch_rows = 1;     // rows of one microbatch on one replica
  // Device, transport and precision (train.device, model.dtype, this machine's GPUs): decided
  // here once for every worker.
  device::Execution execution;
  // On pipeline workers: several processes, token slices, or a no-flush rule (even on one
  // stage); otherwise the single-process trainer runs it.
  bool pipelined = false;
};

// The run spec of `config`, after every check that spans several fields (partition vs model,
// schedule vs chunks, slices, replicas, ZeRO-1, recomputation, batch split, nodes): each failure
// is one UserError line.
RunSpec make_run_spec(const Config& config);

// Rows of one microbatch on one replica: train.batch_size / (microbatches x dp_width), at least 1.
int64_t microbatch_rows_of(const Config& config);

// RunSpec::pipelined without building the model or its partition: the memory preflight asks it
// before anything of the model's size exists.
bool runs_on_pipeline_workers(const Config& config);

}  // namespace pipetrain::runtime
