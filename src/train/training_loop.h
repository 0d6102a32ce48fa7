#pragma once
// The one training loop, shared by the single-process trainer (train/run.cpp) and every
// pipeline worker (runtime/worker_run.cpp): steps, validation, the stop agreement, periodic and
// stop checkpoints, the metrics record, the progress line, the loss plot and summary.json. What
// differs between the two lives behind TrainingSession; in a pipeline every worker runs the
// loop (the hooks hold its collectives) and one worker reports. Free of libtorch.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "train/run.h"
#include "train/step_result.h"

namespace pipetrain {

// What the workers agree on after a step: stop on a signal (SIGINT/SIGTERM, 0 = none), or fail
// on a non-finite loss of the reporting worker at `step` (1-based).
struct StopVerdict {
  int signal = 0;
  bool non_finite_loss = false;
  int64_t step = 0;
  double loss = 0;
};

// Both verdicts in one: the earlier non-finite loss first, then the later one; a signal from either.
StopVerdict either(const StopVerdict& earlier, const StopVerdict& later);

class TrainingSession {
 public:
  virtual ~TrainingSession() = default;
  virtual bool reports() const = 0;  // writes metrics, plots and summary.json
  virtual int rank() const = 0;      // for the fault-injection hook
  virtual StepResult train_step(int64_t step) = 0;
  // Fields of the step's metrics line beyond the loop's own; `logged`: the line is written.
  virtual nlohmann::json step_fields(bool logged) = 0;
  // Loss NaN on workers that do not report; `stoppable` as Trainer::evaluate's.
  virtual Validation evaluate(bool stoppable) = 0;
  // The agreement after step `done`; `count_now`: a checkpoint or the end follows, so no
  // vote may stay uncounted.
  virtual StopVerdict stop_verdict(int64_t done, double loss, bool count_now) = 0;
  // "" when a stop may write a checkpoint mid-run, else why not (the policy cannot resume).
  virtual std::string mid_run_checkpoint_refusal() const { return ""; }
  // Before a step: whether a checkpoint may follow it (a policy keeps what such a checkpoint
  // must hold only then), and after it whether it did keep it.
  virtual void prepare_step(bool /*checkpoint_may_follow*/) {}
  virtual bool checkpointable() const { return true; }
  // RUN_DIR/checkpoints/step-N; returns its folder (on the reporting worker).
  virtual std::string save_checkpoint(int64_t done, double val_loss) = 0;
  // After the last step: the final checkpoint and what the run leaves besides metrics.
  struct Finished {
    std::string sample;                // the text sample ("" without one)
    std::string memory;                // one line per worker (pipelines)
    nlohmann::json summary_fields = nlohmann::json::object();  // more of summary.json
  };
  virtual Finished finish(double val_loss) = 0;
  virtual std::string loss_stage() const = 0;  // who computed the loss, for the error line
};

struct LoopSettings {
  std::string run_dir;
  int64_t first_step = 0;  // a resumed run's
  bool progress = true;
  bool launched = false;          // a worker our launcher started (fault hook)
  double tokens_per_step = 0;     // batch rows x tokens per row
  std::string throughput_unit = "tokens";  // what those count (BatchSource::throughput_unit)
  std::string plot_title = "pipetrain: loss";
};

class BatchSource;
// A run of `config` over `batches` (null on a pipeline worker that reads no data: it counts no
// tokens) from `first_step`, its files in `run_dir`.
LoopSettings loop_settings(const Config& config, const BatchSource* batches, std::string run_dir,
                           int64_t first_step, bool progress);

// " | val 1.2345 accuracy 0.9012" for the progress line ("" before any validation).
std::string validation_progress(const Validation& validation);
// val_loss and val_<measure> for metrics.jsonl.
Measures validation_fields(const Validation& validation);

// Runs steps first_step .. train.steps. Returns the summary on the reporting worker.
std::optional<RunSummary> run_training_loop(const Config& config, TrainingSession& session,
                                             const LoopSettings& settings);

}  // namespace pipetrain
