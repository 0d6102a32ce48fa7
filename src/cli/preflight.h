#pragma once
// Checks of a training run against this machine, before anything is allocated or written: a run
// that cannot fit would allocate until the kernel kills it, and thousands of compute threads
// take minutes to start.
#include <string>

#include "core/config.h"

namespace pipetrain::cli {

// The run's processes on this machine: `workers` of its pipeline.stages x pipeline.dp_width
// (1 for the single-process trainer), and a launcher if one spawned them.
struct ProcessesHere {
  double workers = 1;
  bool launcher = false;
};

// UserError when train.threads exceeds kThreadsPerCore per core, or when the run needs more
// memory than the machine has (from the model's own Model::layer_work, any model.kind): these
// workers' share of the weights, gradients, optimizer state
// and one microbatch's activations of every replica, the data file, and kProcessBytes per
// process. `data_root` as in RunOptions.
void check_run_fits_machine(const Config& config, const std::string& data_root,
                            const ProcessesHere& here);

constexpr int kThreadsPerCore = 4;
// The most compute threads a process here takes (train.threads, profile --threads).
int64_t most_compute_threads();
// A lower bound of one pipetrain process's resident memory before any tensor: the torch wheel's
// libraries loaded (368-390 MiB measured per worker, clusters/this-machine.toml; 462 MiB for a
// process that asks CUDA for its GPUs, as `--version` does).
constexpr double kProcessBytes = 350.0 * (1 << 20);

}  // namespace pipetrain::cli
