// Flush-every-iteration generators: GPipe, 1F1B-flush, interleaved 1F1B, looped breadth-first.
#include <algorithm>

#include "schedule/gen_common.h"

namespace pipetrain::schedule {

Schedule make_gpipe_schedule(const ScheduleSpec& spec) {
  const int p = spec.stages, m = spec.microbatches, slices = spec.slices;
  ComputeOrder one(p);
  for (int w = 0; w < p; ++w) {
    // All forwards (slices in order), then all backwards (microbatches in order, each
    // microbatch's slices in reverse: slice k's backward needs the K/V gradient of slice k+1).
    for (int mb = 0; mb < m; ++mb)
      for (int sl = 0; sl < slices; ++sl) one[w].push_back({ActionKind::Forward, 0, mb, sl, 0});
    for (int mb = 0; mb < m; ++mb)
      for (int sl = slices - 1; sl >= 0; --sl)
        one[w].push_back({ActionKind::Backward, 0, mb, sl, 0});
  }
  return lower_schedule(detail::make_header(spec, "gpipe", WeightPolicyKind::Sync),
                        detail::repeat_iterations(one, spec.iterations), spec);
}

Schedule make_1f1b_flush_schedule(const ScheduleSpec& spec) {
  const int p = spec.stages, m = spec.microbatches;
  ComputeOrder one(p);
  for (int w = 0; w < p; ++w) one[w] = detail::one_f_one_b(w, p, m, m);
  return lower_schedule(detail::make_header(spec, "1f1b", WeightPolicyKind::Sync),
                        detail::repeat_iterations(one, spec.iterations), spec);
}

// Megatron-LM's interleaved 1F1B: virtual microbatch k runs chunk (k / p) % v of microbatch
// (k / (p v)) p + k % p; worker r warms up with 2 (p - r - 1) + (v - 1) p forwards. Needs
// m % p == 0 (the catalogue checks it).
Schedule make_interleaved_schedule(const ScheduleSpec& spec) {
  const int p = spec.stages, m = spec.microbatches, v = spec.chunks;
  if (v == 1) {
    ScheduleSpec plain = spec;
    Schedule s = make_1f1b_flush_schedule(plain);
    s.name = "interleaved";
    return s;
  }
  const int total = m * v;
  auto item = [&](ActionKind kind, int k) {
    int group = k % (p * v);
    int chunk = group / p;
    if (kind != ActionKind::Forward) chunk = v - 1 - chunk;
    return ComputeItem{kind, 0, (k / (p * v)) * p + k % p, 0, chunk};
  };
  ComputeOrder one(p);
  for (int w = 0; w < p; ++w) {
    int warmup = std::min(2 * (p - w - 1) + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k) one[w].push_back(item(ActionKind::Forward, k));
    for (int k = 0; k + warmup < total; ++k) {
      one[w].push_back(item(ActionKind::Forward, k + warmup));
      one[w].push_back(item(ActionKind::Backward, k));
    }
    for (int k = std::max(0, total - warmup); k < total; ++k)
      one[w].push_back(item(ActionKind::Backward, k));
  }
  return lower_schedule(detail::make_header(spec, "interleaved", WeightPolicyKind::Sync),
                        detail::repeat_iterations(one, spec.iterations), spec);
}

// Lamy-Poirier's looped breadth-first: chunk c of every microbatch before chunk c+1 (forward),
// chunks in reverse for the backward; the looping placement lets chunk c+1 start on worker 0
// as soon as the last worker has finished chunk c of microbatch 0.
Schedule make_looped_bfs_schedule(const ScheduleSpec& spec) {
  const int p = spec.stages, m = spec.microbatches, v = spec.chunks;
  ComputeOrder one(p);
  for (int w = 0; w < p; ++w) {
    for (int c = 0; c < v; ++c)
      for (int mb = 0; mb < m; ++mb) one[w].push_back({ActionKind::Forward, 0, mb, 0, c});
    for (int c = v - 1; c >= 0; --c)
      for (int mb = 0; mb < m; ++mb) one[w].push_back({ActionKind::Backward, 0, mb, 0, c});
  }
  return lower_schedule(detail::make_header(spec, "bfs", WeightPolicyKind::Sync),
                        detail::repeat_iterations(one, spec.iterations), spec);
}

}  // namespace pipetrain::schedule
