// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism"): the backward is split into B (input
// gradient, on the critical path) and W (weight gradient, movable). Each worker keeps 1F1B's
// limit of p - r microbatches between forward and B, runs B as soon as its gradient is there,
// and fills what would be idle time with pending W passes. The order is found by list
// scheduling with the spec's nominal costs; it is then fixed data like every other schedule.
#include <algorithm>
#include <cmath>
#include <limits>

#include "schedule/gen_common.h"

namespace pipetrain::schedule {
namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

std::vector<std::vector<ComputeItem>> zb_h1_order(const ScheduleSpec& spec) {
  const int p = spec.stages, m = spec.microbatches;
  const double tf = nominal_duration(spec, ActionKind::Forward, 1);
  const double tb = nominal_duration(spec, ActionKind::BackwardInput, 1);
  const double tw = nominal_duration(spec, ActionKind::BackwardWeight, 1);
  std::vector<std::vector<double>> forward_end(p, std::vector<double>(m, kNever));
  std::vector<std::vector<double>> input_grad_end(p, std::vector<double>(m, kNever));
  std::vector<int> nf(p, 0), nb(p, 0), nw(p, 0);
  std::vector<double> t(p, 0.0);
  std::vector<std::vector<ComputeItem>> order(p);

  auto finished = [&](int w) { return nw[w] == m; };
  while (true) {
    // The worker that is free earliest decides next (ties: lowest index), so every result it
    // could be waiting for that ends before its free time is already known.
    int w = -1;
    for (int x = 0; x < p; ++x)
      if (!finished(x) && (w < 0 || t[x] < t[w])) w = x;
    if (w < 0) break;
    double now = t[w];
    double b_ready = nb[w] < nf[w] ? (w + 1 < p ? input_grad_end[w + 1][nb[w]] : now) : kNever;
    double f_ready = nf[w] < m && nf[w] - nb[w] < p - w
                         ? (w > 0 ? forward_end[w - 1][nf[w]] : now)
                         : kNever;
    if (b_ready <= now) {
      order[w].push_back({ActionKind::BackwardInput, 0, nb[w], 0, 0});
      t[w] = input_grad_end[w][nb[w]++] = now + tb;
    } else if (f_ready <= now) {
      order[w].push_back({ActionKind::Forward, 0, nf[w], 0, 0});
      t[w] = forward_end[w][nf[w]++] = now + tf;
    } else if (nw[w] < nb[w]) {
      order[w].push_back({ActionKind::BackwardWeight, 0, nw[w]++, 0, 0});
      t[w] = now + tw;
    } else {
      // Idle until the next known arrival, or until another worker moves on (it may produce
      // what this one needs).
      double wake = std::min(b_ready, f_ready);
      for (int x = 0; x < p; ++x)
        if (x != w && !finished(x) && t[x] > now) wake = std::min(wake, t[x]);
      if (wake == kNever) {
        for (int x = 0; x < p; ++x)
          if (x != w && !finished(x)) wake = std::min(wake, t[x]);
      }
      t[w] = std::max(wake, now);
      if (t[w] == now) t[w] = std::nextafter(now, kNever);  // others at `now` decide first
    }
  }
  return order;
}

}  // namespace

Schedule make_zb_h1_schedule(const ScheduleSpec& spec) {
  detail::check_spec(spec, detail::Allowed{});
  return lower_schedule(detail::make_header(spec, "zb-h1", WeightPolicyKind::Sync),
                        detail::repeat_iterations(zb_h1_order(spec), spec.iterations), spec);
}

}  // namespace pipetrain::schedule
