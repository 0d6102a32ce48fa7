#pragma once
// Measured links between two local workers: point-to-point send/recv and 2-rank all-reduce over
// Gloo on loopback TCP, each fitted as time(bytes) = latency + bytes / bandwidth.
#include <vector>

#include "plan/profile_json.h"

namespace pipetrain::profile {

struct LinkSample {
  double bytes = 0, seconds = 0;  // one transfer (half a ping-pong round trip) or one all-reduce
};

// Least-squares latency + bytes / bandwidth through the samples (UserError with < 2 sizes).
plan::LinkFit fit_link(const std::vector<LinkSample>& samples);

// Two Comm ranks on two threads of this process, rendezvous on 127.0.0.1; `repeats` timed
// round trips per size after one warm-up, the median kept.
plan::LinkProfile measure_local_links(int repeats);

}  // namespace pipetrain::profile
