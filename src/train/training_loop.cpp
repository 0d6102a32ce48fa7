#include "train/training_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <filesystem>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "core/files.h"
#include "core/progress.h"
#include "core/stop_signal.h"
#include "core/text.h"
#include "device/host_reads.h"
#include "device/step_profiler.h"
#include "io/metrics.h"
#include "io/plot.h"
#include "model/batch_source.h"
#include "train/run_control.h"

namespace fs = std::filesystem;

namespace pipetrain {

LoopSettings loop_settings(const Config& config, const BatchSource* batches, std::string run_dir,
                           int64_t first_step, bool progress) {
  LoopSettings settings;
  settings.run_dir = std::move(run_dir);
  settings.first_step = first_step;
  settings.progress = progress;
  if (batches != nullptr) {
    settings.tokens_per_step = double(config.train.batch_size * batches->tokens_per_row());
    settings.throughput_unit = batches->throughput_unit();
  }
  return settings;
}
namespace {

using Clock = std::chrono::steady_clock;

double seconds_from(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

using Curve = std::vector<std::pair<double, double>>;

void write_curves(const std::string& path, const std::string& title, const Curve& train, const Curve& val) {
  const std::vector<PlotSeries> series = {{"train loss", "#1f77b4", train},
                                          {"validation loss", "#d62728", val}};
  write_file_atomically(path, render_line_plot_svg(series, title, "step", "loss (nats/token)"));
}

// What the reporting worker keeps across steps.
struct Report {
  std::optional<MetricsWriter> metrics;
  std::optional<ProgressLine> progress;
  Curve train_curve, val_curve;
  RunSummary summary;

  void finish_progress() {
    if (progress) progress->finish();
  }
};

void report_step(Report& report, const StepResult& result, nlohmann::json fields, int64_t done,
                 bool logged, bool validated, const Validation& validation, double elapsed,
                 double tokens_per_s, double step_seconds, double seconds_per_step) {
  nlohmann::json record = {{"step", done}, {"loss", result.loss}, {"lr", result.lr},
                           {"grad_norm", result.grad_norm}, {"tokens_per_s", tokens_per_s},
                           {"step_seconds", step_seconds}, {"elapsed_s", elapsed}};
  if (result.loss_scale > 0) {  // float16
    record["loss_scale"] = result.loss_scale;
    record["skipped"] = result.skipped;
  }
  if (validated) {
    for (const auto& [name, value] : validation_fields(validation)) record[name] = value;
    report.val_curve.emplace_back(double(done), validation.loss);
  }
  report.train_curve.emplace_back(double(done), result.loss);
  if (logged) {
    record.update(fields);
    report.metrics->write(record);
  }
  if (report.progress) {
    std::string line = fmt::format("loss {:.4f}", result.loss);
    line += validation_progress(validation);
    const std::string& unit = report.summary.throughput_unit;
    line += fmt::format(" | lr {:.2e} | {} {}/s", result.lr, format_count(tokens_per_s), unit == "tokens" ? "tok" : unit);
    report.progress->update(done, line, seconds_per_step);
  }
  report.summary.final_loss = result.loss;
  report.summary.tokens_per_s = tokens_per_s;
}

// log.profile_step: starts the profiler before the first profiled step and writes its files
// after the last (RUN_DIR/profile/rankN.*), or after the run's last step if that comes first;
// the reporting worker says where they are.
class ProfiledSteps {
 public:
  ProfiledSteps(const Config& config, const fs::path& dir, int rank)
      : first_(config.log.profile_step),
        last_(std::min(config.train.steps, config.log.profile_step + config.log.profile_steps - 1)),
        prefix_((dir / "profile" / fmt::format("rank{}", rank)).string()) {}

  void before(int64_t done) {
    if (first_ > 0 && done == first_) {
      fs::create_directories(fs::path(prefix_).parent_path());
      profiler_.start();
    }
  }
  void after(int64_t done, bool reports) {
    if (!profiler_.running() || done != last_) return;
    profiler_.stop_and_write(prefix_, last_ - first_ + 1);
    if (reports) {
      std::fprintf(stderr, "pipetrain: steps %ld-%ld profiled: %s.txt (where the time went), "
                   "%s.trace.json (ui.perfetto.dev)\n", long(first_), long(last_), prefix_.c_str(),
                   prefix_.c_str());
    }
  }

 private:
  int64_t first_, last_;
  std::string prefix_;
  device::StepProfiler profiler_;
};

}  // namespace

std::string validation_progress(const Validation& validation) {
  if (!std::isfinite(validation.loss)) return "";
  std::string text = fmt::format(" | val {:.4f}", validation.loss);
  for (const auto& [name, value] : validation.measures) text += fmt::format(" {} {:.4f}", name, value);
  return text;
}

Measures validation_fields(const Validation& validation) {
  Measures fields = {{"val_loss", validation.loss}};
  for (const auto& [name, value] : validation.measures) fields.emplace_back("val_" + name, value);
  return fields;
}

StopVerdict either(const StopVerdict& earlier, const StopVerdict& later) {
  StopVerdict verdict = earlier.non_finite_loss || !later.non_finite_loss ? earlier : later;
  verdict.signal = earlier.signal != 0 ? earlier.signal : later.signal;
  return verdict;
}

namespace {

// A stop signal at the end of a step: a worker that cannot checkpoint yet defers it one step
// (keeping what its checkpoint must hold, every worker alike); a run that cannot checkpoint
// mid-run stops without one; otherwise the checkpoint, due or asked for, is written, and a stop
// then ends the run with how to continue it.
class StopHandling {
 public:
  StopHandling(TrainingSession& session, const fs::path& dir)
      : session_(session), dir_(dir), no_resume_(session.mid_run_checkpoint_refusal()) {}

  bool checkpoints_mid_run() const { return no_resume_.empty(); }
  bool deferring() const { return deferred_signal_ != 0; }

  void after_step(int64_t done, int verdict_signal, bool final_step, bool checkpoint_due,
                  double val_loss, Report& report) {
    int signal = deferred_signal_ != 0 ? deferred_signal_ : verdict_signal;
    if (signal != 0 && checkpoints_mid_run() && !final_step && !session_.checkpointable()) {
      deferred_signal_ = signal;
      signal = 0;
    }
    if (signal != 0 && !checkpoints_mid_run()) {
      report.finish_progress();
      if (!session_.reports()) throw StopRequested{signal, ""};
      throw StopRequested{signal, fmt::format("stopped by {} after step {}; no checkpoint: {}",
                                              stop_signal_name(signal), done,
                                              no_resume_)};
    }
    if (signal == 0 && !checkpoint_due) return;
    const std::string saved = session_.save_checkpoint(done, val_loss);
    if (signal == 0) return;
    report.finish_progress();
    if (!session_.reports()) throw StopRequested{signal, ""};  // one worker tells
    stop_after_checkpoint(signal, done, saved, dir_.string());
  }

 private:
  TrainingSession& session_;
  fs::path dir_;
  std::string no_resume_;
  int deferred_signal_ = 0;
};

double number_or(const nlohmann::json& record, const char* key, double otherwise) {
  const auto it = record.find(key);
  return it != record.end() && it->is_number() ? it->get<double>() : otherwise;
}

// A resumed run's curves, final loss and last validation so far, from the metrics lines it
// kept (those of logged steps: before the resume the plot is as dense as log.every). A run
// resumed at its last step, whose summary a stop cut short, reports what it ended with.
Validation continue_report(Report& report, const fs::path& metrics_path) {
  Validation validation;
  if (!fs::exists(metrics_path)) return validation;
  for (const auto& record : read_metrics(metrics_path.string())) {
    const double step = number_or(record, "step", 0), loss = number_or(record, "loss", NAN);
    if (!std::isfinite(loss)) continue;
    report.train_curve.emplace_back(step, loss);
    report.summary.final_loss = loss;
    report.summary.tokens_per_s = number_or(record, "tokens_per_s", 0);
    if (!std::isfinite(number_or(record, "val_loss", NAN))) continue;
    validation = {record["val_loss"].get<double>(), {}};
    for (const auto& [key, value] : record.items()) {
      if (key != "val_loss" && key.rfind("val_", 0) == 0 && value.is_number()) {
        validation.measures.emplace_back(key.substr(4), value.get<double>());
      }
    }
    report.val_curve.emplace_back(step, validation.loss);
  }
  return validation;
}

// The reporting worker's end of the run: the sample, the loss curves and summary.json.
RunSummary summarize_run(const Config& config, const fs::path& dir, const std::string& plot_title,
                         Report& report, const Validation& validation, double seconds,
                         TrainingSession::Finished& finished) {
  RunSummary& summary = report.summary;
  summary.steps = config.train.steps;
  summary.final_val_loss = validation.loss;
  summary.final_val_measures = validation.measures;
  summary.seconds = seconds;
  summary.sample = finished.sample;
  summary.memory = finished.memory;
  if (!summary.sample.empty()) {
    write_file_atomically((dir / "sample.txt").string(), summary.sample + "\n");
  } else {  // (sample.tokens 0: a resumed run's earlier sample is not this run's)
    std::error_code error;
    fs::remove(dir / "sample.txt", error);
  }
  nlohmann::json& summary_json = finished.summary_fields;
  write_curves((dir / "loss.svg").string(), plot_title, report.train_curve, report.val_curve);
  summary_json.update({{"steps", summary.steps},
                       {"final_loss", summary.final_loss},
                       {"final_val_loss", summary.final_val_loss},
                       {"tokens_per_s", summary.tokens_per_s},
                       {"throughput_unit", summary.throughput_unit},
                       {"seconds", summary.seconds}});
  for (const auto& [name, value] : validation_fields(validation)) {
    summary_json["final_" + name] = value;
  }
  write_file_atomically((dir / "summary.json").string(), summary_json.dump(2) + "\n");
  return summary;
}

// The reporting worker's metrics file and progress line; a resumed run appends to its metrics
// and carries on its curves and its last validation (returned).
Validation open_report(Report& report, const Config& config, const LoopSettings& settings) {
  const fs::path metrics = fs::path(settings.run_dir) / "metrics.jsonl";
  const bool resumed = settings.first_step > 0;
  report.metrics.emplace(metrics.string(), /*append=*/resumed);
  if (settings.progress) report.progress.emplace(config.train.steps, config.log.every);
  return resumed ? continue_report(report, metrics) : Validation{};
}

// log.host_reads: the values each step of this worker reads on the host (device/host_reads.h),
// what makes a GPU's host wait inside a step; said at the end, with where the last step's were.
// (Counted on the thread that runs the step: a helper thread's reads are not seen.)
class StepHostReads {
 public:
  explicit StepHostReads(bool on) : on_(on) {}
  void before_step() {
    if (on_) reads_.emplace();
  }
  void after_step() {
    if (!on_) return;
    counts_.push_back(reads_->values());
    last_ = reads_->describe_grouped();
    reads_.reset();
  }
  void say(int rank) const {
    if (counts_.empty()) return;
    const auto [fewest, most] = std::minmax_element(counts_.begin(), counts_.end());
    fmt::print(stderr, "pipetrain: rank {} read {}-{} values on the host a step over {} steps; the "
               "last step: {}\n", rank, *fewest, *most, counts_.size(), last_);
  }

 private:
  bool on_;
  std::optional<device::HostReads> reads_;
  std::vector<int64_t> counts_;
  std::string last_;
};

// Validates the model after a step: true and `validation` set, or false when a stop cut it
// short. The final validation runs whole (it is the run's final_val_loss); another one a stop
// cut short is a mean of fewer batches than the others, so the step records none.
bool validated(TrainingSession& session, bool final_step, Validation& validation) {
  const Validation run = session.evaluate(/*stoppable=*/!final_step);
  if (run.cut_short) return false;
  validation = run;
  return true;
}

}  // namespace

std::optional<RunSummary> run_training_loop(const Config& config, TrainingSession& session,
                                             const LoopSettings& settings) {
  const fs::path dir(settings.run_dir);
  const bool reports = session.reports();
  Report report;
  report.summary.throughput_unit = settings.throughput_unit;
  Validation validation;
  if (reports) validation = open_report(report, config, settings);
  StopHandling stops(session, dir);
  const auto start = Clock::now();
  ProfiledSteps profiled(config, dir, session.rank());
  StepHostReads host_reads(config.log.host_reads != 0);
  for (int64_t step = settings.first_step; step < config.train.steps; ++step) {
    maybe_inject_fault(session.rank(), step, settings.launched);
    session.prepare_step(stops.deferring() || periodic_checkpoint_due(config, step + 1));
    profiled.before(step + 1);
    const auto step_start = Clock::now();
    host_reads.before_step();
    const StepResult result = session.train_step(step);
    host_reads.after_step();
    const double step_seconds = seconds_from(step_start);
    const int64_t done = step + 1;
    profiled.after(done, reports);
    const bool final_step = done == config.train.steps;
    const bool due = final_step || (config.eval.every > 0 && done % config.eval.every == 0);
    const bool logged = due || done % config.log.every == 0 || done == 1;
    const nlohmann::json fields = session.step_fields(logged);
    const bool validate = due && validated(session, final_step, validation);
    const bool checkpoint_due =
        stops.checkpoints_mid_run() && periodic_checkpoint_due(config, done);
    const StopVerdict verdict = session.stop_verdict(done, result.loss, final_step || checkpoint_due);
    if (verdict.non_finite_loss) {
      report.finish_progress();
      if (!reports) return std::nullopt;  // the reporting worker names the failure
      fail_non_finite_loss(verdict.loss, verdict.step, session.loss_stage(), dir.string());
    }
    // The step's metrics line before a stop: the checkpoint below is at this step, so a
    // resumed run keeps the line (and never writes it again).
    if (reports) {
      const double elapsed = seconds_from(start);
      const double ran = double(done - settings.first_step);
      report_step(report, result, fields, done, logged, validate, validation, elapsed,
                  settings.tokens_per_step * ran / elapsed, step_seconds, elapsed / ran);
    }
    stops.after_step(done, verdict.signal, final_step, checkpoint_due, validation.loss, report);
  }
  report.finish_progress();
  host_reads.say(session.rank());
  maybe_inject_fault(session.rank(), config.train.steps, settings.launched);  // the fault tests' "end"
  TrainingSession::Finished finished = session.finish(validation.loss);
  if (!reports) return std::nullopt;
  return summarize_run(config, dir, settings.plot_title, report, validation, seconds_from(start),
                       finished);
}

}  // namespace pipetrain
