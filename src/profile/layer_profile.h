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
  // Empty: 1, 2, 4 and 8, or only the run's microbatch for a model that trains differently at
  // each size (BatchNorm: Model::microbatch_dependence).
  std::vector<int64_t> microbatch_sizes;
  int repeats = 5;  // rounds: each entry is the median of this many timings (each after a warm-up)
  int threads = 1;  // compute threads, as each pipeline worker gets
};

double median_of(std::vector<double> samples);  // the upper median; samples must not be empty

// The median of `repeats` timed runs of `timed`, each after `prepare`, after one warm-up run.
double median_seconds(int repeats, const std::function<void()>& prepare,
                      const std::function<void()>& timed);

// Times forward, full backward and input-only backward of every layer of the configured model
// (a GPT's [embedding, blocks, head with the loss]) at each microbatch size; weight-gradient
// time = full - input-only. A GPT's profile carries its shape (`train --plan` sets it); any
// other model's carries its kind and, where the microbatch size changes what it trains, the
// run's microbatch (UserError when the sizes leave it out).
plan::ModelProfile profile_model_layers(const Config& config, const ProfileOptions& options,
                                      const std::function<void(const std::string&)>& progress);

}  // namespace pipetrain::profile
