#pragma once
// Checks of a training run against this machine, before anything is allocated or written: a run
// that cannot fit would allocate until the kernel kills it, and thousands of compute threads
// take minutes to start.
#include <string>

#include "core/config.h"

namespace pipetrain::cli {

// UserError when train.threads exceeds kThreadsPerCore per core, or when the run needs more
// memory than the machine has (weights, gradients, optimizer state, one microbatch's
// activations and the data file, on this node). `data_root` as in RunOptions.
void check_run_fits_machine(const Config& config, const std::string& data_root);

constexpr int kThreadsPerCore = 4;

}  // namespace pipetrain::cli
