#pragma once
// Entry points of a pipeline-parallel run, free of libtorch headers so the CLI compiles fast.
//
// `pipetrain train --stages 2` (no RANK in the environment) is the launcher: it hosts the
// rendezvous store on a free port, spawns one worker per stage by re-executing the same binary
// with the torchrun variables set and `--launch-file RUN_DIR/launch-node<K>.json` (the run
// folder, rendezvous file, progress and checkpoint to resume: runtime/launch_file.h) after the
// same `train` arguments, watches them, and stops all of them if one fails.
// With RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set (torchrun, or our launcher) the process is
// one worker: rank = replica * stages + worker (see runtime/layout.h).
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "runtime/launch_file.h"
#include "runtime/run_spec.h"
#include "core/error.h"
#include "train/run.h"

namespace pipetrain::runtime {

// Where a worker our launcher started writes its error line (core/error.h).
constexpr const char* kWorkerErrorFileVariable = kErrorFileVariable;
// The `pipetrain train` option naming a worker's launch file.
constexpr const char* kLaunchFileOption = "--launch-file";

bool started_as_worker();                    // RANK is set in the environment

// Launcher or worker, whichever this process is, for a run with spec.pipelined (see
// runtime/run_spec.h: it is made once from `config`). `train_args` are the arguments after
// `pipetrain train`, passed unchanged to the workers. Returns the run's summary where this
// process should report it (the launcher; a torchrun worker holding the last stage).
// `launch_file`: the file our launcher named (kLaunchFileOption); "" for the launcher itself
// and torchrun's workers.
std::optional<RunSummary> run_pipeline(const Config& config, const RunSpec& spec,
                                       const RunOptions& options,
                                       const std::vector<std::string>& train_args,
                                       const std::string& launch_file);

// Internal pieces, exposed for tests. `launch`: what our launcher told this worker; none under
// torchrun.
std::optional<RunSummary> run_pipeline_worker(const Config& config, const RunSpec& spec,
                                              const RunOptions& options,
                                              const std::optional<LaunchSettings>& launch);
RunSummary launch_pipeline_workers(const Config& config, const RunSpec& spec,
                                   const RunOptions& options,
                                   const std::vector<std::string>& train_args);

}  // namespace pipetrain::runtime
