#include "schedule/validate.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "core/error.h"
#include "schedule/catalogue.h"
#include "schedule/replay.h"
#include "schedule/text_format.h"

namespace pipetrain::schedule {
namespace {

// First problem found: where it is and what is wrong.
struct Problem {
  int worker = -1;
  int position = -1;
  std::string what;
};

struct Invalid {
  Problem problem;
};

[[noreturn]] void reject(int worker, int position, std::string what) {
  throw Invalid{{worker, position, std::move(what)}};
}

std::string describe(const Schedule& s, int w, const Action& a) {
  std::string text = fmt::format("{} of stage {} microbatch {}", kind_name(a.kind),
                                 s.stage_of(w, a.chunk), s.global_microbatch(a));
  if (s.slices > 1) text += fmt::format(" slice {}", a.slice);
  return text;
}

// Action `at` of worker w: indices in range, a version on each compute action, and a transfer's
// peer the worker of the neighbouring stage it names.
void check_action(const Schedule& s, int w, int at, const Action& a) {
  if (a.iteration < 0 || a.iteration >= s.iterations || a.microbatch < 0 ||
      a.microbatch >= s.microbatches || a.slice < 0 || a.slice >= s.slices || a.chunk < 0 ||
      a.chunk >= s.chunks)
    reject(w, at, "iteration, microbatch, slice or chunk out of range");
  if (is_compute(a.kind) && a.version < 0) reject(w, at, "compute action without a version");
  if (!is_comm(a.kind)) return;
  int stage = s.stage_of(w, a.chunk);
  bool towards_next = a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvGrad;
  int other = towards_next ? stage + 1 : stage - 1;
  if (other < 0 || other >= s.stages())
    reject(w, at, fmt::format("{} of stage {} has no neighbouring stage {}", kind_name(a.kind),
                              stage, other));
  if (a.peer != s.worker_of_stage(other) || a.peer == w)
    reject(w, at, fmt::format("peer {} is not the worker of stage {} (worker {})", a.peer,
                              other, s.worker_of_stage(other)));
}

void check_structure(const Schedule& s) {
  if (s.workers < 1 || s.chunks < 1 || s.microbatches < 1 || s.slices < 1 || s.iterations < 1 ||
      s.dp_width < 1)
    reject(-1, -1, "sizes (workers, chunks, microbatches, slices, iterations, dp_width) must be >= 1");
  if (static_cast<int>(s.actions.size()) != s.workers)
    reject(-1, -1, fmt::format("{} action lists for {} workers", s.actions.size(), s.workers));
  for (int w = 0; w < s.workers; ++w) {
    for (size_t k = 0; k < s.actions[w].size(); ++k) check_action(s, w, static_cast<int>(k), s.actions[w][k]);
  }
}

// Walks one worker's list in order: dependencies, versions, activations and live versions.
class WorkerWalk {
 public:
  WorkerWalk(const Schedule& s, int w) : s_(s), w_(w), steps_(s.chunks, 0) {}

  void run(ScheduleStats& stats) {
    for (size_t k = 0; k < s_.actions[w_].size(); ++k) step(static_cast<int>(k));
    stats.peak_inflight[w_] = peak_inflight_;
    stats.peak_live_versions[w_] = peak_live_;
  }

 private:
  using Unit = std::tuple<int, int, int>;  // (stage, global microbatch, slice)
  enum Flag { kForward = 1, kInputGrad = 2, kWeightGrad = 4, kGotInput = 8, kGotGrad = 16 };

  bool has(const Unit& u, int flag) const {
    auto it = flags_.find(u);
    return it != flags_.end() && (it->second & flag);
  }

  void step(int k) {
    const Action& a = s_.actions[w_][k];
    const Unit u{s_.stage_of(w_, a.chunk), s_.global_microbatch(a), a.slice};
    switch (a.kind) {
      case ActionKind::Forward:
        check_forward(k, a, u);
        break;
      case ActionKind::Backward:
      case ActionKind::BackwardInput:
        check_backward(k, a, u);
        break;
      case ActionKind::BackwardWeight:
        need(k, a, has(u, kInputGrad), "runs before its BackwardInput");
        once(k, a, u, kWeightGrad);
        break;
      case ActionKind::SendActivation:
        need(k, a, has(u, kForward), "sends an activation its worker has not computed");
        break;
      case ActionKind::SendGrad:
        need(k, a, has(u, kInputGrad), "sends a gradient its worker has not computed");
        break;
      case ActionKind::RecvActivation:
        flags_[{std::get<0>(u) - 1, std::get<1>(u), a.slice}] |= kGotInput;
        break;
      case ActionKind::RecvGrad:
        flags_[{std::get<0>(u) + 1, std::get<1>(u), a.slice}] |= kGotGrad;
        break;
      case ActionKind::AllReduceGrads:
        break;
      case ActionKind::OptimizerStep:
        optimizer_step(k, a);
        break;
    }
    if (is_compute(a.kind)) check_version(k, a, u);
    if (a.kind == ActionKind::Forward) inflight_[u] = a.version;
    if (is_gradient_producer(a.kind)) {
      inflight_.erase(u);
      ++grads_done_[group_of(a)][a.chunk];
    }
    track_peaks(a.chunk);
  }

  void need(int k, const Action& a, bool ok, const std::string& why) const {
    if (!ok) reject(w_, k, describe(s_, w_, a) + " " + why);
  }

  void once(int k, const Action& a, const Unit& u, int flag) {
    need(k, a, !has(u, flag), "appears twice");
    flags_[u] |= flag;
  }

  // Its input: the previous stage's forward on this worker, or received; and the previous slice.
  void check_forward(int k, const Action& a, const Unit& u) {
    const auto [stage, gmb, slice] = u;
    const bool prev_local = stage > 0 && s_.worker_of_stage(stage - 1) == w_;
    need(k, a, stage == 0 || has({stage - 1, gmb, slice}, prev_local ? kForward : kGotInput),
         prev_local ? "runs before the forward of the previous stage"
                    : "runs before its input arrives (no RecvActivation earlier)");
    need(k, a, slice == 0 || has({stage, gmb, slice - 1}, kForward),
         "runs before the forward of the previous slice");
    once(k, a, u, kForward);
  }

  // After its forward, with its output gradient (the next stage's backward on this worker, or
  // received), and after the next slice's backward: slices go backward in reverse.
  void check_backward(int k, const Action& a, const Unit& u) {
    const auto [stage, gmb, slice] = u;
    const bool last_stage = stage + 1 == s_.stages();
    const bool next_local = !last_stage && s_.worker_of_stage(stage + 1) == w_;
    need(k, a, has(u, kForward), "runs before its Forward");
    need(k, a, last_stage || has({stage + 1, gmb, slice}, next_local ? kInputGrad : kGotGrad),
         next_local ? "runs before the backward of the next stage"
                    : "runs before its output gradient arrives (no RecvGrad earlier)");
    need(k, a, slice + 1 == s_.slices || has({stage, gmb, slice + 1}, kInputGrad),
         "runs before the backward of the next slice (slices go backward in reverse)");
    once(k, a, u, kInputGrad);
    if (a.kind == ActionKind::Backward) once(k, a, u, kWeightGrad);
  }

  int group_of(const Action& a) const {
    return updates_per_microbatch(s_.policy.kind) ? s_.global_microbatch(a) : a.iteration;
  }

  void optimizer_step(int k, const Action& a) {
    const int expected = updates_per_microbatch(s_.policy.kind) ? s_.slices : s_.microbatches * s_.slices;
    if (grads_done_[group_of(a)][a.chunk] != expected)
      reject(w_, k, fmt::format("OptimizerStep of stage {} runs before all {} gradients of its "
                                "update group are computed",
                                s_.stage_of(w_, a.chunk), expected));
    if (a.version != steps_[a.chunk] + 1)
      reject(w_, k, fmt::format("OptimizerStep produces version {}, expected {}", a.version,
                                steps_[a.chunk] + 1));
    steps_[a.chunk] = a.version;
  }

  void check_version(int k, const Action& a, const Unit& u) {
    const int latest = steps_[a.chunk];
    auto need = [&](bool ok, const std::string& why) {
      if (!ok)
        reject(w_, k, fmt::format("{} reads weight version {} {} (latest on this stage: {})",
                                  describe(s_, w_, a), a.version, why, latest));
    };
    need(a.version <= latest, "which is not produced yet");
    auto forward = inflight_.find(u);
    bool has_forward = a.kind != ActionKind::Forward && forward != inflight_.end();
    switch (s_.policy.kind) {
      case WeightPolicyKind::Sync:
      case WeightPolicyKind::Predicted:
        need(a.version == latest, "but this policy reads the latest version");
        break;
      case WeightPolicyKind::DoubleBuffer: {
        const int rule = double_buffer_version(a.iteration, s_.policy.sync_groups);
        need(a.version == rule, fmt::format("but 2BW group {} reads version {}", a.iteration, rule));
      }
        [[fallthrough]];
      case WeightPolicyKind::Stash:
        if (a.kind == ActionKind::Forward) need(a.version == latest || s_.policy.kind ==
                                                    WeightPolicyKind::DoubleBuffer,
                                                "but stashing reads the latest for a forward");
        need(!has_forward || forward->second == a.version,
             fmt::format("but its forward read version {}",
                         has_forward ? forward->second : -1));
        break;
    }
  }

  void track_peaks(int chunk) {
    int inflight = static_cast<int>(inflight_.size());
    peak_inflight_ = std::max(peak_inflight_, inflight);
    std::set<int> live{steps_[chunk]};
    const bool pinned = stashes_versions(s_.policy.kind);  // a forward's version lives to its backward
    for (const auto& [unit, version] : inflight_)
      if (pinned && s_.chunk_of_stage(std::get<0>(unit)) == chunk) live.insert(version);
    int count = static_cast<int>(live.size());
    if (s_.policy.kind == WeightPolicyKind::Predicted) {
      // A predicted copy exists while a forward of a stage with staleness > 0 runs.
      int stage = s_.stage_of(w_, chunk);
      const auto& st = s_.policy.forward_staleness;
      if (st.empty() || (stage < static_cast<int>(st.size()) && st[stage] > 0)) count = 2;
    }
    peak_live_ = std::max(peak_live_, count);
  }

  const Schedule& s_;
  int w_;
  std::vector<int> steps_;                         // per chunk: versions produced
  std::map<Unit, int> flags_;
  std::map<Unit, int> inflight_;                   // unit -> version its forward read
  std::map<int, std::map<int, int>> grads_done_;   // group -> chunk -> gradients
  int peak_inflight_ = 0, peak_live_ = 0;
};

void check_complete(const Schedule& s) {
  std::map<std::tuple<int, int, int>, int> units;  // (stage, gmb, slice) -> flags
  for (int w = 0; w < s.workers; ++w)
    for (const Action& a : s.actions[w]) {
      auto& f = units[{s.stage_of(w, a.chunk), s.global_microbatch(a), a.slice}];
      if (a.kind == ActionKind::Forward) f |= 1;
      if (is_gradient_producer(a.kind)) f |= 2;
    }
  for (int st = 0; st < s.stages(); ++st)
    for (int gmb = 0; gmb < s.total_microbatches(); ++gmb)
      for (int sl = 0; sl < s.slices; ++sl) {
        int f = units.count({st, gmb, sl}) ? units[{st, gmb, sl}] : 0;
        if (f != 3)
          reject(s.worker_of_stage(st), -1,
                 fmt::format("stage {} microbatch {} slice {} is missing its {}", st, gmb, sl,
                             (f & 1) ? "backward" : "forward"));
      }
}

void check_deadlock(const Schedule& s, const TransferMatch& match) {
  ReplayResult r = replay(s, match, [](int, const Action& a) { return is_compute(a.kind) ? 1.0 : 0.0; });
  if (r.finished) return;
  int first = 0;
  while (r.stopped_at[first] == s.actions[first].size()) ++first;
  std::string chain;
  std::set<int> seen;
  for (int w = first; !seen.count(w);) {
    seen.insert(w);
    size_t k = r.stopped_at[w];
    if (k >= s.actions[w].size()) {
      chain += fmt::format("worker {} has finished", w);
      break;
    }
    const Action& a = s.actions[w][k];
    chain += fmt::format("worker {} at position {} ({}) waits for worker {}; ", w, k,
                         action_token(s, w, a), a.peer);
    w = a.peer;
  }
  reject(first, static_cast<int>(r.stopped_at[first]),
         "deadlock with blocking send/recv (cyclic wait): " + chain);
}

}  // namespace

Validation validate(const Schedule& s) {
  Validation v;
  v.stats.peak_inflight.assign(std::max(0, s.workers), 0);
  v.stats.peak_live_versions.assign(std::max(0, s.workers), 0);
  try {
    check_structure(s);
    if (s.policy.kind == WeightPolicyKind::DoubleBuffer && s.microbatches < s.stages())
      reject(-1, -1, fmt::format("2BW needs microbatches >= stages (m >= d) to keep 2 weight "
                                 "versions; got m={} < d={}", s.microbatches, s.stages()));
    TransferMatch match = match_transfers(s);
    if (!match.problem.empty()) reject(match.bad_worker, match.bad_position, match.problem);
    for (int w = 0; w < s.workers; ++w) WorkerWalk(s, w).run(v.stats);
    check_complete(s);
    check_deadlock(s, match);
    if (s.policy.kind == WeightPolicyKind::DoubleBuffer)
      for (int w = 0; w < s.workers; ++w)
        if (v.stats.peak_live_versions[w] > 2)
          reject(w, -1, fmt::format("2BW keeps 2 weight versions but worker {} needs {}", w,
                                    v.stats.peak_live_versions[w]));
    v.ok = true;
  } catch (const Invalid& invalid) {
    const Problem& p = invalid.problem;
    std::string where = "schedule '" + s.name + "' is invalid: ";
    if (p.worker >= 0 && p.position >= 0 && p.worker < static_cast<int>(s.actions.size()) &&
        p.position < static_cast<int>(s.actions[p.worker].size()))
      where += fmt::format("worker {}, position {} ({}): ", p.worker, p.position,
                           action_token(s, p.worker, s.actions[p.worker][p.position]));
    else if (p.worker >= 0)
      where += fmt::format("worker {}: ", p.worker);
    v.error = where + p.what;
    if (s.workers >= 1 && static_cast<int>(s.actions.size()) == s.workers)
      v.error += "\n" + format_grid(s, GridOptions{true, false, p.worker, p.position});
  }
  return v;
}

ScheduleStats validate_or_throw(const Schedule& s) {
  Validation v = validate(s);
  if (!v.ok) throw UserError(v.error);
  return v.stats;
}

}  // namespace pipetrain::schedule
