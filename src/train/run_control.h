#pragma once
// What every training loop (single process or pipeline worker) decides around its steps:
// periodic checkpoints, stopping on SIGINT/SIGTERM, stopping on a non-finite loss, and where a
// resumed run's metrics continue. Free of libtorch.
#include <cstdint>
#include <string>

#include "core/config.h"

namespace pipetrain {

// A periodic checkpoint after `done` steps (the final step has its own).
bool periodic_checkpoint_due(const Config& config, int64_t done);

// Throws StopRequested: "stopped by SIGTERM after step N; checkpoint ...; resume with ...".
[[noreturn]] void stop_after_checkpoint(int signal, int64_t done, const std::string& checkpoint,
                                        const std::string& run_dir);

// UserError naming the step, the stage that computed the loss and the last good checkpoint.
[[noreturn]] void fail_non_finite_loss(double loss, int64_t step, const std::string& stage,
                                       const std::string& run_dir);

// Test hook for fault tests, PIPETRAIN_FAULT=RANK:STEP[:ACTION], before that step on that rank
// (the single-process trainer is rank 0): "kill" (default) = SIGKILL itself; "term" = SIGTERM
// to the launcher (`launched`, and to itself, so the run stops after this very step) or itself,
// as a user stopping the run would; "hup" = as "term" with SIGHUP (a closed terminal); "int" =
// SIGINT to itself only (a user signalling one worker); "hang" = SIGSTOP itself, a worker that
// stops responding. STEP = train.steps: after the last step, before the final checkpoint and
// the sample; STEP = kStartupFault (-1): as a pipeline worker starts, before its rendezvous.
constexpr int64_t kStartupFault = -1;
void maybe_inject_fault(int rank, int64_t step, bool launched);

// A resumed run continues metrics.jsonl: lines after `step` (written after that checkpoint)
// are dropped so no step appears twice.
void keep_metrics_up_to(const std::string& path, int64_t step);

// What a resumed run says it does: continue at `step` of `steps` from `checkpoint_dir`, or, at
// the last step, write what a stop after the final checkpoint left unwritten.
std::string resuming_line(int64_t step, int64_t steps, const std::string& checkpoint_dir);

}  // namespace pipetrain
