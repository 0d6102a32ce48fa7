// The entries of the schedule catalogue, and the closed-form update rules of the no-flush ones.
#include "schedule/catalogue.h"

#include <algorithm>

#include "schedule/generators.h"

namespace pipetrain::schedule {
namespace {

// Closed forms in (stage r, microbatch j, p stages, m microbatches per group). A per-microbatch
// policy's microbatch j meets j updates on the last stage, p-1-r fewer on stage r by its forward.
int pipedream_version(int r, int64_t j, int p) { return std::max(0, int(j) - (p - 1 - r)); }
Reads latest(int, int64_t j, int, int) { return {int(j), 0}; }
// 2BW: group g = j / m reads version g-1 (group 0 version 0), forward and backward alike.
Reads two_bw(int, int64_t j, int, int m) { return {std::max(0, int(j / m) - 1), 0}; }
Reads two_bw_predicted(int r, int64_t j, int p, int m) { return {two_bw(r, j, p, m).version, 1}; }
Reads pipedream(int r, int64_t j, int p, int) { return {pipedream_version(r, j, p), 0}; }
Reads pipeoptim_forward(int r, int64_t j, int p, int) { return {pipedream_version(r, j, p), p - 1 - r}; }
Reads spectrain_forward(int r, int64_t j, int p, int) {
  return {pipedream_version(r, j, p), r / 2 + p - 1 - r};
}
Reads spectrain_backward(int r, int64_t j, int, int) { return {int(j), r / 2}; }

RuntimeSupport runs_fully() { return {true, true, true, true}; }
// No-flush schedules: replicas, and ZeRO-1 unless they predict weights; recomputation where
// each backward reads the weights its forward read (the forward it runs again then rebuilds the
// same activations; PipeOptim's and SpecTrain's backwards read other weights).
RuntimeSupport runs_without_flush(bool predicts, const ClosedFormRule& reads) {
  return {true, true, !predicts, reads.forward == reads.backward};
}

}  // namespace

Reads reads_at(ReadsRule rule, int stage, int64_t microbatch, int stages, int microbatches,
               int sync_steps) {
  const int64_t group = microbatch / microbatches;
  if (sync_steps > 0 && group <= sync_steps) return {int(group), 0};
  return rule(stage, microbatch, stages, microbatches);
}

int loss_version(const ScheduleEntry& entry, int64_t update, int stages, int microbatches, int sync_steps) {
  if (entry.reference.forward == nullptr) return int(update);
  const int64_t first = entry.updates_per_microbatch() ? update : update * microbatches;
  return reads_at(entry.reference.forward, stages - 1, first, stages, microbatches, sync_steps).version;
}

namespace {

std::vector<ScheduleEntry> entries() {
  std::vector<ScheduleEntry> all;
  all.reserve(16);  // each entry is completed through the reference `add` returns
  auto add = [&](std::string name, Schedule (*generate)(const ScheduleSpec&),
                 WeightPolicyKind policy, std::string summary) -> ScheduleEntry& {
    ScheduleEntry e;
    e.name = std::move(name);
    e.generate = generate;
    e.policy = policy;
    e.rule = flushes(policy) ? "sync" : e.name;
    e.resumes = true;  // no-flush policies checkpoint the weights their early actions read
    e.summary = std::move(summary);
    return all.emplace_back(std::move(e));
  };
  using K = WeightPolicyKind;
  auto& gpipe = add("gpipe", make_gpipe_schedule, K::Sync,
                    "GPipe: all forwards, then all backwards; activations of all m microbatches.");
  gpipe.parameters.slices = true;
  gpipe.runtime = runs_fully();
  gpipe.planner.plans = true;

  auto& flush = add("1f1b", make_1f1b_flush_schedule, K::Sync,
                    "1F1B with a flush every iteration (PipeDream-Flush): same bubble, at most p-s "
                    "microbatches in flight on stage s.");
  flush.runtime = runs_fully();
  flush.planner = {true, true, 1};

  auto& interleaved = add("interleaved", make_interleaved_schedule, K::Sync,
                          "Megatron interleaved 1F1B, v=2 chunks per worker (stage = chunk*p + "
                          "worker): bubble divided by v.");
  interleaved.parameters.chunks = true;
  interleaved.parameters.chunked_microbatches_multiple_of_stages = true;
  interleaved.runtime = runs_fully();
  interleaved.planner = {true, false, 2};

  auto& bfs = add("bfs", make_looped_bfs_schedule, K::Sync,
                  "Looped breadth-first (Lamy-Poirier): chunk c of every microbatch before chunk "
                  "c+1; holds v*m chunk activations.");
  bfs.parameters.chunks = true;
  bfs.runtime = runs_fully();
  bfs.planner = {true, false, 2};

  auto& zero_bubble = add("zb-h1", make_zb_h1_schedule, K::Sync,
                          "Zero-bubble ZB-H1: backward split into B (input grad, I) and W (weight "
                          "grad); W fills the cooldown.");
  zero_bubble.runtime = runs_fully();
  zero_bubble.planner.plans = true;
  zero_bubble.splits_backward = true;

  auto& zb_h2 = add("zb-h2", make_zb_h2_schedule, K::Sync,
                    "Zero-bubble ZB-H2: 2(p-1-r) extra warm-up forwards on worker r, W deferred "
                    "by 2r B-passes; up to 2p-1 microbatches in flight; parallelograms that "
                    "interlock across iterations without an update barrier.");
  zb_h2.interlocks_iterations = zb_h2.splits_backward = true;
  zb_h2.runtime = runs_fully();
  zb_h2.planner.plans = true;

  auto& zb_v = add("zb-v", make_zb_v_schedule, K::Sync,
                   "Zero-bubble ZB-V (torch ScheduleZBVZeroBubble): 2 chunks per worker in a V "
                   "(worker w: stages w and 2p-1-w), split backward, 1F1B's peak memory.");
  zb_v.parameters.chunks = zb_v.parameters.v_shape = true;
  zb_v.interlocks_iterations = zb_v.splits_backward = true;
  zb_v.runtime = runs_fully();
  zb_v.planner = {true, false, 2};

  auto& dualpipev = add("dualpipev", make_dualpipev_schedule, K::Sync,
                        "DualPipeV (torch ScheduleDualPipeV): V placement, the forward of one "
                        "chunk and the full backward of the other run as a pair; m >= 2p.");
  dualpipev.parameters.chunks = dualpipev.parameters.v_shape = true;
  dualpipev.splits_backward = true;
  dualpipev.parameters.microbatches_per_worker = 2;
  dualpipev.runtime = runs_fully();
  dualpipev.planner = {true, false, 2};

  auto& two_bw_entry = add("2bw", make_2bw_schedule, K::DoubleBuffer,
                           "PipeDream-2BW: 1F1B without flush, a new weight version every m "
                           "microbatches, 2 versions.");
  two_bw_entry.reference = {two_bw, two_bw, false};
  two_bw_entry.parameters.sync_warmup = true;
  two_bw_entry.runtime = runs_without_flush(false, two_bw_entry.reference);
  two_bw_entry.planner.plans = true;
  two_bw_entry.recommended = {"muon", "error_feedback", 0.25,
                              "the default job at 800 steps, two seeds: validation within 0.6% of "
                              "synchronous Muon (1.9% without the warm-up), where AdamW ends 41% "
                              "above synchronous AdamW"};

  auto& predicted_2bw = add("2bw-predict", make_2bw_predict_schedule, K::DoubleBuffer,
                            "PipeDream-2BW whose versions are extrapolated one update ahead with "
                            "the optimizer's own direction, to cancel the one-step delay.");
  predicted_2bw.reference = {two_bw_predicted, two_bw_predicted, false};
  predicted_2bw.runtime = runs_without_flush(true, predicted_2bw.reference);

  auto& stash = add("pipedream", make_pipedream_schedule, K::Stash,
                    "PipeDream: update after every microbatch, weight stashing keeps up to p "
                    "versions on stage 0.");
  stash.reference = {pipedream, pipedream, false};
  stash.runtime = runs_without_flush(false, stash.reference);

  auto& pipeoptim = add("pipeoptim", make_pipeoptim_schedule, K::Predicted,
                        "PipeOptim: PipeDream's order, forward on weights predicted s = D-r-1 "
                        "updates ahead.");
  pipeoptim.reference = {pipeoptim_forward, latest, false};
  pipeoptim.runtime = runs_without_flush(true, pipeoptim.reference);

  auto& spectrain = add("spectrain", make_spectrain_schedule, K::Predicted,
                        "SpecTrain: as PipeOptim, momentum prediction; forward s = "
                        "floor(r/2)+D-r-1, backward floor(r/2).");
  spectrain.reference = {spectrain_forward, spectrain_backward, true};
  spectrain.runtime = runs_without_flush(true, spectrain.reference);

  auto& nostash = add("pipedream-nostash", make_pipedream_nostash_schedule, K::Predicted,
                      "PipeDream without weight stashing (a negative control): forward and "
                      "backward read the latest weights of their moment.");
  nostash.reference = {pipedream, latest, false};
  nostash.runtime = runs_without_flush(false, nostash.reference);
  return all;
}

}  // namespace

const std::vector<ScheduleEntry>& schedule_catalogue() {
  static const std::vector<ScheduleEntry> catalogue = entries();
  return catalogue;
}

}  // namespace pipetrain::schedule
