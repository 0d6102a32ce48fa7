#pragma once
// Measured per-layer costs of the configured model on this machine (times measured, bytes from
// its Model::layer_work), the input of the balanced
// partitioner, the planner and the simulator. The JSON form is free of libtorch
// (plan/profile_json.h reads it).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "plan/profile_json.h"

namespace pipetrain::profile {

struct ProfileOptions {
  std::vector<int64_t> microbatch_sizes = {1, 2, 4, 8};
  int repeats = 5;  // rounds: each entry is the median of this many timings (each after a warm-up)
  int threads = 1;  // compute threads, as each pipeline worker gets
};

double median_of(std::vector<double> samples);  // the upper median; samples must not be empty

// The median of `repeats` timed runs of `timed`, each after `prepare`, after one warm-up run.
double median_seconds(int repeats, const std::function<void()>& prepare,
                      const std::function<void()>& timed);

// Times forward, full backward and input-only backward of every layer [embedding, blocks,
// head (with the loss)] at each microbatch size; weight-gradient time = full - input-only.
plan::ModelProfile profile_gpt_layers(const Config& config, const ProfileOptions& options,
                                      const std::function<void(const std::string&)>& progress);

}  // namespace pipetrain::profile
