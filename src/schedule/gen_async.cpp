// 1F1B without flush: the same order of compute for PipeDream-2BW, PipeDream, PipeOptim and
// SpecTrain; they differ only in when updates land and which weights each action reads.
#include <algorithm>

#include "schedule/gen_common.h"
#include "schedule/staleness.h"

namespace pipetrain::schedule {
namespace {

Schedule async_1f1b(const ScheduleSpec& spec, WeightPolicyKind policy, const char* name) {
  const int p = spec.stages, total = spec.microbatches * spec.iterations;
  ComputeOrder order(p);
  for (int w = 0; w < p; ++w) order[w] = detail::one_f_one_b(w, p, total, spec.microbatches);
  Schedule s = lower_schedule(detail::make_header(spec, name, policy), order, spec);
  if (policy == WeightPolicyKind::Predicted) derive_staleness(s);
  return s;
}

// 2BW's order: 1F1B without flushes, after an optional synchronous warm-up of
// spec.sync_iterations iterations as 1F1B with a flush after each (the rest starts a fresh fill).
Schedule double_buffered(const ScheduleSpec& spec) {
  const int p = spec.stages, m = spec.microbatches;
  const int flushed = std::min(spec.sync_iterations, spec.iterations);
  ComputeOrder one_flushed(p);
  for (int w = 0; w < p; ++w) one_flushed[w] = detail::one_f_one_b(w, p, m, m);
  ComputeOrder order = detail::repeat_iterations(one_flushed, flushed);
  for (int w = 0; w < p; ++w) {
    for (ComputeItem item : detail::one_f_one_b(w, p, (spec.iterations - flushed) * m, m)) {
      item.iteration += flushed;
      order[w].push_back(item);
    }
  }
  Schedule s = detail::make_header(spec, "2bw", WeightPolicyKind::DoubleBuffer);
  s.policy.sync_groups = flushed;
  return lower_schedule(s, order, spec);
}

}  // namespace

Schedule make_async_1f1b_schedule(const ScheduleSpec& spec, WeightPolicyKind policy) {
  return async_1f1b(spec, policy, spec.name.c_str());
}

Schedule make_2bw_schedule(const ScheduleSpec& spec) {
  // m >= d, which 2 versions need, is the catalogue's check of every DoubleBuffer schedule.
  return double_buffered(spec);
}

Schedule make_2bw_predict_schedule(const ScheduleSpec& spec) {
  Schedule s = make_2bw_schedule(spec);
  s.name = "2bw-predict";
  s.policy.predict_ahead = 1;  // the one update that lands between a version and its use
  return s;
}

Schedule make_pipedream_nostash_schedule(const ScheduleSpec& spec) {
  // Latest weights at every moment = prediction with zero staleness on every stage.
  Schedule s = async_1f1b(spec, WeightPolicyKind::Predicted, "pipedream-nostash");
  s.policy.forward_staleness.assign(size_t(s.stages()), 0);
  s.policy.backward_staleness.assign(size_t(s.stages()), 0);
  return s;
}

Schedule make_pipedream_schedule(const ScheduleSpec& spec) {
  return async_1f1b(spec, WeightPolicyKind::Stash, "pipedream");
}

Schedule make_pipeoptim_schedule(const ScheduleSpec& spec) {
  return async_1f1b(spec, WeightPolicyKind::Predicted, "pipeoptim");
}

Schedule make_spectrain_schedule(const ScheduleSpec& spec) {
  Schedule s = async_1f1b(spec, WeightPolicyKind::Predicted, "spectrain");
  s.policy.predict_backward = true;
  derive_staleness(s);
  return s;
}

}  // namespace pipetrain::schedule
