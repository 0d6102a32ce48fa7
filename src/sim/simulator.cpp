#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/ranges.h>

#include "core/error.h"
#include "schedule/catalogue.h"
#include "schedule/send_release.h"
#include "schedule/steps.h"
#include "sim/shared_cores.h"

namespace pipetrain::sim {
using schedule::Action;
using schedule::ActionKind;

namespace {

// The transient bytes of a compute action: a split backward's passes may know their own.
double action_workspace(const StageCost& c, ActionKind kind) {
  if (kind == ActionKind::BackwardInput && c.input_workspace_bytes >= 0) return c.input_workspace_bytes;
  if (kind == ActionKind::BackwardWeight && c.weight_workspace_bytes >= 0) return c.weight_workspace_bytes;
  if (kind == ActionKind::Backward && c.backward_workspace_bytes >= 0) return c.backward_workspace_bytes;
  return c.workspace_bytes;
}

using Changes = std::vector<std::tuple<double, bool, double>>;  // (time, last, bytes)
constexpr double kForever = std::numeric_limits<double>::infinity();

// A no-flush worker's posted replica sum (the AllReduceGrads at `k`) lands before its update's
// finish point: the start of the first action after the update that needs its new weights
// (schedule::needs_update_done), or the list's end.
double landed_by(const schedule::Schedule& s, int w, const std::vector<schedule::ActionTime>& times, size_t k) {
  const std::vector<Action>& list = s.actions[size_t(w)];
  size_t update = k;
  while (update < list.size() && list[update].kind != ActionKind::OptimizerStep) ++update;
  if (update == list.size()) return times.back().end;
  for (size_t next = update + 1; next < list.size(); ++next) {
    if (schedule::needs_update_done(list[next], list[update].version)) return times[next].start;
  }
  return times.back().end;
}

// The runtime's sent gradients (a sent activation is its forward's output, held anyway): a send
// keeps its tensor until a receive from its peer shows the peer took it (schedule/send_release.h:
// freed at that receive's end), or until the step's end waits for it (a no-flush step's sends:
// the next step's end). The zero-bubble tail of W passes, after the last gradient is sent and
// before anything arrives, holds several.
Changes held_gradient_sends(const schedule::Schedule& s, const CostModel& costs, int w,
                            const std::vector<schedule::ActionTime>& times) {
  const std::vector<Action>& list = s.actions[size_t(w)];
  std::map<int, double> step_end;  // the worker's last action of each iteration
  for (size_t k = 0; k < list.size(); ++k) {
    step_end[list[k].iteration] = std::max(step_end[list[k].iteration], times[k].end);
  }
  struct Held {
    size_t at;
    double bytes, freed;
  };
  std::map<int, std::vector<Held>> to_peer;  // in send order
  std::map<int, size_t> released_to_peer;    // how many of them a receive showed arrived
  std::map<schedule::Message, std::pair<int, size_t>> sent;  // its peer and place
  const auto released = schedule::sends_released_by_receives(s, w, s.actions);
  const int waited_at = schedule::flushes(s.policy.kind) ? 0 : 1;  // steps after the send's
  for (size_t k = 0; k < list.size(); ++k) {
    const Action& a = list[k];
    if (a.kind == ActionKind::SendGrad) {
      const double bytes = costs.stage(s.stage_of(w, a.chunk) - 1).transfer_bytes *
                           costs.slice_share(a.slice, s.slices);
      const auto end = step_end.find(a.iteration + waited_at);
      auto& sends = to_peer[a.peer];
      sent[*schedule::message_of(s, w, a)] = {a.peer, sends.size()};
      sends.push_back({k, bytes, end == step_end.end() ? times.back().end : end->second});
    }
    const auto found = released[k] ? sent.find(*released[k]) : sent.end();
    if (found == sent.end()) continue;
    const auto [peer, through] = found->second;  // messages to a peer arrive in order
    auto& sends = to_peer[peer];
    for (size_t& next = released_to_peer[peer]; next <= through; ++next) {
      sends[next].freed = std::min(sends[next].freed, times[k].end);
    }
  }
  Changes changes;
  for (const auto& [peer, sends] : to_peer) {
    for (const Held& send : sends) {
      changes.push_back({times[send.at].start, false, send.bytes});
      changes.push_back({send.freed, false, -send.bytes});
    }
  }
  return changes;
}

// Peak bytes of activations held: from the start of a forward to the end of the action that
// completes the unit's gradients (Backward, or BackwardWeight for a split backward), plus the
// split backward's weight-pass bytes from the start of BackwardInput to the end of BackwardWeight.
// With `gradients`, also each stage's gradient_bytes from the end of its chunk's first
// gradient-producing action of an iteration (the start of a first W pass, which then frees its
// microbatch's activations at its start too) to the end of the worker's last OptimizerStep of that
// iteration (the runtime updates a worker's chunks at once: the global norm needs all their
// gradients, and a V worker's head and embedding share a tied weight's), its workspace during
// each compute action (action_workspace), the gradients it has sent and still holds
// (held_gradient_sends), and the flat copy of a stage's gradients its replica sum makes.
// Held::transients counts all but the gradients (a no-flush worker's, kept whole across steps).
enum class Held { activations, transients, everything };

// The replica sum copies the stage's gradients into one flat buffer (runtime/replica_sums.h)
// that a flushing step lands at once. A no-flush one lands it once the other replicas' sums have
// come and its update has begun, in a helper thread, at a time no schedule fixes: by the
// update's finish point at the latest (landed_by), which the model takes. k: the AllReduceGrads.
void add_replica_sum(Changes& changes, const schedule::Schedule& s, int w,
                     const std::vector<schedule::ActionTime>& times, size_t k, double gradient_bytes) {
  const double landed = schedule::flushes(s.policy.kind) ? times[k].end : landed_by(s, w, times, k);
  changes.push_back({times[k].start, false, gradient_bytes});
  changes.push_back({landed, false, -gradient_bytes});
}

// Each (chunk, iteration)'s gradients go at the end of the worker's last OptimizerStep of that
// iteration (`last`: after everything else at that time); held to the end if none is here.
void add_gradient_releases(Changes& changes, const schedule::Schedule& s, const CostModel& costs,
                           int w, const std::vector<schedule::ActionTime>& times,
                           const std::set<std::pair<int, int>>& with_gradients) {
  std::map<int, size_t> last_update;  // iteration -> its last OptimizerStep here
  for (size_t k = 0; k < s.actions[w].size(); ++k) {
    if (s.actions[w][k].kind == ActionKind::OptimizerStep) last_update[s.actions[w][k].iteration] = k;
  }
  for (const auto& [chunk, iteration] : with_gradients) {
    const auto update = last_update.find(iteration);
    if (update == last_update.end()) continue;
    const double bytes = costs.stage(s.stage_of(w, chunk)).gradient_bytes;
    changes.push_back({times[update->second].end, true, -bytes});
  }
}

Changes held_changes(const schedule::Schedule& s, const CostModel& costs, int w,
                     const std::vector<schedule::ActionTime>& times, Held count) {
  const bool transients = count != Held::activations, gradients = count == Held::everything;
  // (time, last, bytes): frees sort first at ties, but an update's release of the gradients
  // (`last`) after everything else at its time (a zero-time update ends with its backward).
  Changes changes = transients ? held_gradient_sends(s, costs, w, times) : Changes{};
  std::set<std::pair<int, int>> with_gradients;  // (chunk, iteration)
  for (size_t k = 0; k < s.actions[w].size(); ++k) {
    const Action& a = s.actions[w][k];
    const StageCost& c = costs.stage(s.stage_of(w, a.chunk));
    const double share = costs.slice_share(a.slice, s.slices);
    const double bytes = c.activation_bytes * share, held = c.weight_pass_bytes * share;
    if (a.kind == ActionKind::Forward) changes.push_back({times[k].start, false, bytes});
    if (a.kind == ActionKind::BackwardInput) changes.push_back({times[k].start, false, held});
    const bool produces = schedule::is_gradient_producer(a.kind);
    const bool first = transients && produces && with_gradients.insert({a.chunk, a.iteration}).second;
    // A stage's first W pass of an iteration makes all its gradients (the first is kept):
    // counted from its start. Restarted from recorded gradients, its junctions free their saved
    // inputs as they run (counted at its start too) while the recorded gradients stay to its
    // end. Its first junction makes its weight gradient before any of that is freed: the pass's
    // workspace (which holds that gradient) on what it started with, an instant before the swap
    // (GPT-2 small's block stage: an MLP weight's 9 MiB, seen in trace.json). With nothing
    // recorded (a model that gives no weight-pass bytes) its activations count to its end. A
    // whole Backward frees as it goes: its start peaks. (The first stage runs whole backwards:
    // schedule::lower_schedule.)
    const bool first_weight_pass = first && a.kind == ActionKind::BackwardWeight;
    const bool frees_at_start = first_weight_pass && c.weight_pass_bytes > 0;
    // (just after its start: once its first junction's weight gradient is made)
    const double swapped_at = frees_at_start ? std::nextafter(times[k].start, kForever) : times[k].start;
    const double made_at = first_weight_pass ? swapped_at : times[k].end;
    if (a.kind == ActionKind::BackwardWeight) changes.push_back({times[k].end, false, -held});
    if (produces) changes.push_back({frees_at_start ? swapped_at : times[k].end, false, -bytes});
    if (!transients) continue;
    if (schedule::is_compute(a.kind) && (!first_weight_pass || frees_at_start)) {
      const double workspace = action_workspace(c, a.kind);
      changes.push_back({times[k].start, false, workspace});
      changes.push_back({frees_at_start ? swapped_at : times[k].end, false, -workspace});
    }
    if (first && gradients) changes.push_back({made_at, false, c.gradient_bytes});
    if (a.kind == ActionKind::AllReduceGrads && s.dp_width > 1) add_replica_sum(changes, s, w, times, k, c.gradient_bytes);
  }
  if (gradients) add_gradient_releases(changes, s, costs, w, times, with_gradients);
  std::sort(changes.begin(), changes.end());
  return changes;
}

double peak_activations(const schedule::Schedule& s, const CostModel& costs, int w,
                        const std::vector<schedule::ActionTime>& times, Held count) {
  double held = 0, peak = 0;
  for (const auto& [time, last, bytes] : held_changes(s, costs, w, times, count)) peak = std::max(peak, held += bytes);
  return peak;
}

// UserError unless every stage's times and sizes, and the links', are usable.
void check_costs(const schedule::Schedule& s, const CostModel& costs) {
  for (int st = 0; st < s.stages(); ++st) {
    const StageCost& c = costs.stage(st);
    const bool weight_fits = c.input_ms >= 0 || c.weight_ms <= c.backward_ms;
    bool amounts = !std::isnan(c.input_ms) && !std::isinf(c.input_ms);  // (negative: not given)
    for (const double amount : {c.forward_ms, c.backward_ms, c.weight_ms, c.optimizer_ms, c.allreduce_ms,
                                c.activation_bytes, c.weight_bytes, c.weight_pass_bytes, c.transfer_bytes}) {
      amounts = amounts && std::isfinite(amount) && amount >= 0;  // (NaN fails: no time has no order)
    }
    if (!amounts || !weight_fits)
      fail("cost model of stage {}: times and sizes must be >= 0 and weight <= backward (or an input "
           "pass time given)", st);
  }
  if (!(costs.p2p_latency_ms >= 0 && std::isfinite(costs.p2p_latency_ms)) || !(costs.bandwidth_bytes_per_ms >= 0) ||
      !(costs.send_post_ms >= 0 && std::isfinite(costs.send_post_ms)) || !(costs.send_post_bytes_per_ms >= 0))
    fail("cost model: p2p latency, bandwidth and send post costs must be finite and >= 0 (bandwidths may be infinite)");
  if (costs.shared_cores < 0) fail("cost model: shared cores must be >= 0");
}

// Every action's start and end, replayed as the runtime runs the lists (eager sends, posted
// replica sums); UserError when the schedule deadlocks.
std::vector<std::vector<schedule::ActionTime>> timed_actions(const schedule::Schedule& s, const CostModel& costs) {
  schedule::TransferMatch match = schedule::match_transfers(s);
  schedule::ReplayOptions options;
  options.mode = schedule::SendMode::Eager;
  options.update_barrier = costs.synchronous_updates;
  options.send_post = [&](int w, const Action& a) { return costs.send_post_duration_ms(s, w, a); };
  options.posted_reductions = schedule::posts_replica_sums(s);  // as the runtime
  schedule::ReplayResult replay =
      costs.shared_cores > 0
          ? replay_on_shared_cores(s, match, costs, options)
          : schedule::replay(
                s, match, [&](int w, const Action& a) { return costs.duration_ms(s, w, a); }, options);
  if (!replay.finished) {
    fail("schedule '{}' deadlocks in the simulation{}: workers stop at actions {}", s.name,
         costs.synchronous_updates ? " with synchronous updates" : "", fmt::join(replay.stopped_at, ", "));
  }
  return std::move(replay.times);
}

// The makespan and the window the rates are measured over: with 4 or more iterations, from the
// end of the first to the end of the second-to-last (the steady state, without fill and drain);
// else the whole run.
void measure_window(const schedule::Schedule& s, const CostModel& costs, SimResult& r) {
  std::vector<double> iteration_end(size_t(s.iterations), 0.0);
  for (int w = 0; w < s.workers; ++w) {
    for (size_t k = 0; k < s.actions[size_t(w)].size(); ++k) {
      r.makespan_ms = std::max(r.makespan_ms, r.times[size_t(w)][k].end);
      const Action& a = s.actions[size_t(w)][k];
      if (counts_as_busy(a.kind))
        iteration_end[size_t(a.iteration)] = std::max(iteration_end[size_t(a.iteration)], r.times[size_t(w)][k].end);
    }
  }
  int window_iterations = s.iterations;
  r.window_end_ms = r.makespan_ms;
  if (s.iterations >= 4) {
    r.window_start_ms = iteration_end[0];
    r.window_end_ms = iteration_end[size_t(s.iterations - 2)];
    window_iterations = s.iterations - 2;
  }
  r.iteration_ms = (r.window_end_ms - r.window_start_ms) / window_iterations;
  if (r.iteration_ms > 0) {
    r.microbatches_per_s = s.microbatches / r.iteration_ms * 1000.0;
    r.samples_per_s = r.microbatches_per_s * costs.samples_per_microbatch * s.dp_width;
  }
}

// Worker w's busy time and bubble in the window, and its memory peaks.
void measure_worker(const schedule::Schedule& s, const CostModel& costs, int w, SimResult& r) {
  const auto& times = r.times[size_t(w)];
  const double window = r.window_end_ms - r.window_start_ms;
  double busy = 0;
  for (size_t k = 0; k < s.actions[size_t(w)].size(); ++k) {
    if (!counts_as_busy(s.actions[size_t(w)][k].kind)) continue;
    busy += std::max(0.0, std::min(times[k].end, r.window_end_ms) - std::max(times[k].start, r.window_start_ms));
  }
  r.busy_ms.push_back(busy);
  r.bubble_fraction.push_back(window > 0 ? 1.0 - busy / window : 0.0);
  const double activations = peak_activations(s, costs, w, times, Held::activations);
  double weights = 0;
  for (int c = 0; c < s.chunks; ++c) weights += costs.stage(s.stage_of(w, c)).weight_bytes;
  r.peak_activation_bytes.push_back(activations);
  r.peak_held_bytes.push_back(peak_activations(s, costs, w, times, Held::everything));
  r.peak_transient_bytes.push_back(peak_activations(s, costs, w, times, Held::transients));
  r.peak_memory_bytes.push_back(activations + weights * r.stats.peak_live_versions[size_t(w)]);
}

}  // namespace

SimResult simulate(const schedule::Schedule& s, const CostModel& costs) {
  SimResult r;
  r.stats = schedule::validate_or_throw(s);
  check_costs(s, costs);
  r.times = timed_actions(s, costs);
  measure_window(s, costs, r);
  for (int w = 0; w < s.workers; ++w) measure_worker(s, costs, w, r);
  return r;
}

std::vector<HeldDuring> held_during_actions(const schedule::Schedule& s, const CostModel& costs,
                                            int worker, const SimResult& result) {
  const auto& times = result.times.at(size_t(worker));
  const Changes changes = held_changes(s, costs, worker, times, Held::everything);
  // Changes before `t`, and the frees at `t` (which sort first): an allocation at an action's
  // end is the next action's. An update's release of the gradients (`last`) is the update's own.
  const auto before = [&](size_t next, double t, bool update) {
    const auto& [time, last, bytes] = changes[next];
    return time < t || (time == t && bytes < 0 && (!last || update));
  };
  const bool posts = schedule::posts_replica_sums(s);
  std::vector<HeldDuring> during;
  size_t next = 0;  // the first change not yet applied
  double held = 0;
  for (size_t k = 0; k < times.size(); ++k) {
    const ActionKind kind = s.actions[size_t(worker)][k].kind;
    for (; next < changes.size() && before(next, times[k].start, false); ++next) held += std::get<2>(changes[next]);
    HeldDuring action{held, held};
    // A posted all-reduce's worker goes on at once, and a send's once it is posted: their times
    // overlap the next actions', which take the changes from there.
    double end = posts && kind == ActionKind::AllReduceGrads ? times[k].start : times[k].end;
    if (k + 1 < times.size()) end = std::min(end, std::max(times[k].start, times[k + 1].start));
    for (; next < changes.size() && before(next, end, kind == ActionKind::OptimizerStep); ++next) {
      held += std::get<2>(changes[next]);
      action.peak = std::max(action.peak, held);
    }
    action.at_end = held;
    during.push_back(action);
  }
  return during;
}

}  // namespace pipetrain::sim
