// The zero-bubble handcrafted schedules (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR
// 2024): the backward is split into B (input gradient, on the critical path) and W (weight
// gradient, movable). Both run 1F1B's alternation of F and B after a warm-up of forwards and
// defer each W by a number of B passes:
//   ZB-H1: worker r warms up with p-1-r forwards and runs W(j) right after B(j + r). B passes
//   travel back at t_B per hop instead of t_B + t_W: bubble (p-1)(t_F + t_B - t_W) at 1F1B's
//   peak of p microbatches (worker 0). Exact for m >= p with any t_W <= t_F + t_B.
//   ZB-H2: worker r warms up with 2(p-1-r) forwards (the extra ones fill the wait for the first
//   B) and runs W(j) right after B(j + 2r), so the last r W passes of worker r fill its tail:
//   every worker is busy from its first forward to its last W (a parallelogram), holding at
//   most 2p-1 microbatches. With a flush between iterations the fill still costs (p-1) t_F;
//   without one (the paper's optimizer post-validation) consecutive parallelograms interlock and
//   the bubble is (p-1)(t_F + t_B - 2 t_W), zero at equal times (tests/sim/closed_forms_test.cpp).
#include <algorithm>

#include "schedule/gen_common.h"

namespace pipetrain::schedule {
namespace {

// F^warmup, then F B pairs, each B followed by the W that is `defer` B passes behind it.
std::vector<ComputeItem> split_backward_order(int warmup, int defer, int m) {
  std::vector<ComputeItem> order;
  int forwards = 0, inputs = 0, weights = 0;
  auto forward = [&] { order.push_back({ActionKind::Forward, 0, forwards++, 0, 0}); };
  auto input_grad = [&] {
    order.push_back({ActionKind::BackwardInput, 0, inputs++, 0, 0});
    while (weights < inputs - defer) order.push_back({ActionKind::BackwardWeight, 0, weights++, 0, 0});
  };
  for (int i = 0; i < std::min(warmup, m); ++i) forward();
  while (forwards < m) forward(), input_grad();  // steady state
  while (inputs < m) input_grad();               // cooldown
  while (weights < m) order.push_back({ActionKind::BackwardWeight, 0, weights++, 0, 0});
  return order;
}

// warmup(r, p) and defer(r) per worker r of p.
Schedule zero_bubble(const ScheduleSpec& spec, const char* name, int (*warmup)(int, int),
                     int (*defer)(int)) {
  ComputeOrder order(spec.stages);
  for (int w = 0; w < spec.stages; ++w)
    order[w] = split_backward_order(warmup(w, spec.stages), defer(w), spec.microbatches);
  return lower_schedule(detail::make_header(spec, name, WeightPolicyKind::Sync),
                        detail::repeat_iterations(order, spec.iterations), spec);
}

}  // namespace

Schedule make_zb_h1_schedule(const ScheduleSpec& spec) {
  return zero_bubble(spec, "zb-h1", [](int r, int p) { return p - 1 - r; }, [](int r) { return r; });
}

Schedule make_zb_h2_schedule(const ScheduleSpec& spec) {
  return zero_bubble(spec, "zb-h2", [](int r, int p) { return 2 * (p - 1 - r); },
                     [](int r) { return 2 * r; });
}

}  // namespace pipetrain::schedule
