// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): the backward is split into B (input
// gradient, on the critical path) and W (weight gradient, movable). Worker r runs the 1F1B
// order of F and B, and defers each W by r B-passes: W(j) runs right after B(j + r), the last
// r W passes fill the cooldown. B-passes travel back at t_B per hop instead of t_B + t_W, which
// cuts the bubble to (p-1)(t_F + t_B - t_W), while at most p microbatches are held between F
// and W on any worker (1F1B's peak, on worker 0). Exact for m >= p with any t_W <= t_F + t_B.
#include "schedule/gen_common.h"

namespace pipetrain::schedule {
namespace {

std::vector<ComputeItem> zb_h1_worker_order(int w, int p, int m) {
  std::vector<ComputeItem> order;
  int forwards = 0, inputs = 0, weights = 0;
  auto forward = [&] { order.push_back({ActionKind::Forward, 0, forwards++, 0, 0}); };
  auto input_grad = [&] {
    order.push_back({ActionKind::BackwardInput, 0, inputs++, 0, 0});
    while (weights < inputs - w) order.push_back({ActionKind::BackwardWeight, 0, weights++, 0, 0});
  };
  for (int i = 0; i < std::min(p - w - 1, m); ++i) forward();  // 1F1B warm-up
  while (forwards < m) forward(), input_grad();                  // steady state
  while (inputs < m) input_grad();                               // cooldown
  while (weights < m) order.push_back({ActionKind::BackwardWeight, 0, weights++, 0, 0});
  return order;
}

}  // namespace

Schedule make_zb_h1_schedule(const ScheduleSpec& spec) {
  ComputeOrder order(spec.stages);
  for (int w = 0; w < spec.stages; ++w) order[w] = zb_h1_worker_order(w, spec.stages, spec.microbatches);
  return lower_schedule(detail::make_header(spec, "zb-h1", WeightPolicyKind::Sync),
                        detail::repeat_iterations(order, spec.iterations), spec);
}

}  // namespace pipetrain::schedule
