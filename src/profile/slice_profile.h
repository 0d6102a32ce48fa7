#pragma once
// Measured latency of TeraPipe token slices on this machine: forward + backward time of one
// transformer block of the configured GPT for a slice of l tokens after c cached tokens, on a
// grid of (l, c) in multiples of 8, and the fit t(l, c) = t(l, 0) + a l + b c + g l c.
#include <cstdint>
#include <functional>
#include <string>

#include "core/config.h"
#include "plan/slice_latency.h"

namespace pipetrain::profile {

struct SliceProfileOptions {
  int64_t batch = 1;  // sequences per microbatch
  int repeats = 7;    // rounds over the grid (after one warm-up round); medians per point
  int threads = 1;    // compute threads, as each pipeline worker gets
};

// Lengths 8, 16, 32, ... up to model.seq_len (and seq_len itself); contexts 0 and 1/8, 1/4,
// 1/2, 3/4 of seq_len (multiples of 8), every pair with l + c <= seq_len.
std::vector<std::pair<int64_t, int64_t>> slice_grid(int64_t seq_len);

plan::SliceProfile profile_token_slices(const Config& config, const SliceProfileOptions& options,
                                        const std::function<void(const std::string&)>& progress);

}  // namespace pipetrain::profile
