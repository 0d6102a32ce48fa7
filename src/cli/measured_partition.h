#pragma once
// pipeline.partition = "measured": the launcher times the model's layers where its workers will
// run them and gives every worker the same balanced counts.
#include <string>
#include <vector>

#include "core/config.h"

namespace pipetrain::cli {

// For a pipeline run whose partition is "measured", launched by pipetrain (not a worker): times
// every layer's forward and backward at the run's microbatch rows, on its device, with a
// worker's threads (pipetrain profile's timing: 3 rounds, medians, calibrated to the whole
// model), balances those times (the "balanced" partitioner, V placements included), says so on
// stderr, writes the counts into `config` and appends them to `worker_args` (the last override
// wins). Several nodes would each measure their own: refused. Anything else: unchanged.
void resolve_measured_partition(Config& config, std::vector<std::string>& worker_args);

}  // namespace pipetrain::cli
