#pragma once
// The schedule catalogue: one entry per schedule with everything the rest of pipetrain needs to
// know about it (generator, weight policy, flush, resume, which parameters it takes, what runs
// and plans it). Nothing outside src/schedule compares schedule names: it asks the catalogue.
// A new schedule is one generator (generators.h) and one entry (catalogue.cpp).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace pipetrain::schedule {

// The two rules a weight policy kind implies, written once. Sync schedules flush at the end of
// every iteration; the others run without flushes. Stash and Predicted (PipeDream's family)
// update after every microbatch; Sync and DoubleBuffer once per iteration of m microbatches.
bool flushes(WeightPolicyKind kind);
bool updates_per_microbatch(WeightPolicyKind kind);
// DoubleBuffer and Stash keep their weight versions as tensors of their own and point the
// parameters at the one an action reads; under captured CUDA graphs, whose parameters cannot
// move, the parameters are one more copy each version is copied into (runtime/weight_versions.h).
bool stashes_versions(WeightPolicyKind kind);

// What microbatch j (counted over the run) reads on stage r of p: a weight version (the number
// of updates it includes) and how many updates ahead it is extrapolated.
struct Reads {
  int version = 0;
  int predict = 0;
};
using ReadsRule = Reads (*)(int stage, int64_t microbatch, int stages, int microbatches);

// A no-flush schedule's update rule as closed forms, written independently of its generator:
// AsyncReference executes them, and the exactness tests hold the pipelined runs to them.
struct ClosedFormRule {
  ReadsRule forward = nullptr;   // null: synchronous (plain mini-batch training)
  ReadsRule backward = nullptr;
  bool momentum_only = false;    // extrapolate with SGD momentum alone (SpecTrain), not the update
};

// What microbatch j reads under the rule, after a synchronous warm-up of `sync_steps` steps
// (groups of m microbatches): if sync_steps > 0, up to and including group sync_steps the latest
// version j / m, unextrapolated; then (and always without a warm-up) the rule itself.
Reads reads_at(ReadsRule rule, int stage, int64_t microbatch, int stages, int microbatches,
               int sync_steps);

// Parameters a generator takes beyond the ones every generator takes (p, m, iterations, w >= 1).
struct Parameters {
  bool chunks = false;  // v > 1 model chunks per worker (looping placement)
  bool slices = false;  // token slices per microbatch (TeraPipe)
  bool chunked_microbatches_multiple_of_stages = false;  // with v > 1: m % p == 0 (Megatron)
  bool v_shape = false;  // exactly two chunks per worker, placed in a V (Placement::V)
  int microbatches_per_worker = 0;  // m >= this x p (DualPipeV: 2)
  // A synchronous warm-up (ScheduleSpec::sync_iterations): its first iterations flush, and its
  // closed-form rule reads the latest version there (reads_at).
  bool sync_warmup = false;
};

struct RuntimeSupport {
  bool runs = false;           // real workers run it (`pipetrain train`)
  bool data_parallel = false;  // with pipeline.dp_width > 1
  // With pipeline.zero1 (the optimizer state sharded over the replicas): not when its weights
  // are extrapolated with the optimizer's state, which a replica holds only a shard of.
  bool zero1 = false;
  bool recompute = false;      // with pipeline.recompute
};

struct PlannerSupport {
  bool plans = false;      // `pipetrain plan` considers it
  bool one_stage = false;  // it stands for plain data parallelism at d = 1 (one entry does)
  int chunks = 1;          // model chunks per device it plans with
};

struct ScheduleEntry {
  std::string name;
  Schedule (*generate)(const ScheduleSpec&) = nullptr;  // unchecked: see make_schedule
  WeightPolicyKind policy = WeightPolicyKind::Sync;
  // The update rule's name: "sync" for every flushing schedule, else the paper's ("2bw", ...).
  // Checkpoints record it; a run continues only under the same rule.
  std::string rule = "sync";
  ClosedFormRule reference;
  Parameters parameters;
  bool resumes = false;  // exact resume from a checkpoint taken between two steps
  RuntimeSupport runtime;
  PlannerSupport planner;
  std::string summary;  // one line for docs/schedules.md
  // The training recipe measured best under this rule (docs/weight-policies.md), which
  // `pipetrain train` suggests to a run that uses another; empty: no advice.
  struct Recipe {
    std::string optimizer, delay_correction;
    double sync_warmup_fraction = 0;  // of train.steps, as pipeline.sync_warmup_steps
    std::string evidence;
  } recommended;

  bool flushes() const { return schedule::flushes(policy); }
  Placement placement() const { return parameters.v_shape ? Placement::V : Placement::Looping; }
  bool updates_per_microbatch() const { return schedule::updates_per_microbatch(policy); }
  // Its iterations interlock when updates need no synchronisation across stages (the zero-bubble
  // paper's optimizer post-validation): each worker starts the next iteration after its own
  // update, and consecutive parallelograms tile. An update barrier (pipetrain's runtime, whose
  // update all-reduces the global gradient norm) undoes it.
  bool interlocks_iterations = false;
  // Its stages past the first split their backwards into B and W (zero-bubble): what a stage
  // costs then is forward + B + W (plan::StageLimits::split_backward). Checked against the
  // generator's lists (Catalogue.NamesAreUniqueAndEachGeneratorBuildsItsOwnEntry).
  bool splits_backward = false;
  // No-flush schedules reach their steady state from the third iteration on, and so do the
  // interlocking ones when updates are not synchronised (with a barrier their lists of several
  // iterations, whose transfers interleave, would deadlock: one iteration is the steady state).
  int simulated_iterations(bool synchronous_updates = false) const {
    return flushes() && (!interlocks_iterations || synchronous_updates) ? 1 : 4;
  }
  // Most weight versions one stage holds (the planner's memory model).
  int weight_versions(int stages) const;
  // "" when the generator builds a valid schedule for `spec`, else why not (one line).
  std::string check(const ScheduleSpec& spec) const;
  // Why it cannot start with `sync_steps` synchronous steps ("" if it can, or if sync_steps <= 0).
  std::string sync_warmup_refusal(int64_t sync_steps) const;
};

// Every schedule, in documentation order.
const std::vector<ScheduleEntry>& schedule_catalogue();
const ScheduleEntry* find_schedule(const std::string& name);  // null when unknown
const ScheduleEntry& schedule_entry(const std::string& name);  // UserError naming the known ones

// The weight version the last stage's forwards of update `update` (counted over the run) read:
// their losses, and so that update's gradients, carry that version's loss scale
// (train/loss_scale.h). Flushing schedules: the latest, `update`; a no-flush rule's own (2BW one
// behind after its warm-up). Every microbatch of an update reads the same one there
// (Catalogue.LossVersionIsOnePerUpdate).
int loss_version(const ScheduleEntry& entry, int64_t update, int stages, int microbatches, int sync_steps);
std::vector<std::string> schedule_names_where(const std::function<bool(const ScheduleEntry&)>& keep);
// The runtime's entry for `name`; a UserError, prefixed with `origin`, for a name it does not run
// (naming the ones it runs).
const ScheduleEntry& runtime_schedule(const std::string& name, const std::string& origin);

// The catalogue as a Markdown table (docs/schedules.md, `pipetrain simulate --catalogue`).
std::string catalogue_markdown();

}  // namespace pipetrain::schedule
