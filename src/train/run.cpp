#include "train/run.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/machine.h"
#include "core/progress.h"
#include "core/stop_signal.h"
#include "core/text.h"
#include "data/text_codec.h"
#include "io/metrics.h"
#include "io/checkpoint_dir.h"
#include "io/plot.h"
#include "io/run_folder.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "train/run_control.h"
#include "train/sample.h"
#include "train/trainer.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Weights + optimizer state into `dir`; returns the sidecar describing them.
CheckpointInfo write_state(const std::string& dir, Trainer& trainer, const Config& config,
                           int64_t step, double val_loss) {
  const auto checksums = save_module_state(dir, "model.safetensors", "optimizer.safetensors",
                                           trainer.model(), trainer.optimizer());
  CheckpointInfo info =
      make_checkpoint_info(config, step, {{0, trainer.model_definition().layer_count()}});
  info.crc32c = checksums;
  info.val_loss = val_loss;
  info.weight_versions = {{"model.safetensors"}};
  info.optimizer_files = {"optimizer.safetensors"};
  return info;
}

// The run folder's checkpoint/ (the final state, the documented place of model.safetensors).
void write_checkpoint(const std::string& dir, Trainer& trainer, const Config& config, int64_t step,
                      double val_loss) {
  fs::create_directories(dir);
  const CheckpointInfo info = write_state(dir, trainer, config, step, val_loss);
  write_file_atomically((fs::path(dir) / "checkpoint.json").string(), checkpoint_info_json(info));
}

// RUN_DIR/checkpoints/step-N/, made complete and `latest` before older ones are dropped.
std::string write_periodic_checkpoint(const std::string& run_dir, Trainer& trainer,
                                      const Config& config, int64_t step, double val_loss) {
  const std::string partial = begin_checkpoint(run_dir, step);
  return commit_checkpoint(run_dir, write_state(partial, trainer, config, step, val_loss),
                           config.checkpoint.keep);
}

// A resumed run's checkpoint, read and checked before anything starts.
struct ResumePoint {
  std::string dir;
  CheckpointInfo info;
  CheckpointTensors tensors;
};

std::optional<ResumePoint> read_resume_point(const Config& config, const RunOptions& options) {
  if (!options.resume) return std::nullopt;
  ResumePoint point;
  point.dir = latest_checkpoint(options.run_dir);
  point.info = read_checkpoint_for(point.dir, config, {{0, make_model(config)->layer_count()}});
  point.tensors = read_checkpoint_tensors(point.dir, point.info);
  return point;
}

// The step a resumed run continues from (0 for a new run), with the trainer's state loaded.
int64_t restore(Trainer& trainer, const RunOptions& options,
                const std::optional<ResumePoint>& point) {
  if (!point) return 0;
  const std::string& dir = point->dir;
  const CheckpointInfo& info = point->info;
  load_module_state(point->tensors, dir, trainer.model(), trainer.optimizer(),
                    trainer.model_definition().shared_parameters());
  restore_torch_rng_state(info.rng_state, dir);
  keep_metrics_up_to((fs::path(options.run_dir) / "metrics.jsonl").string(), info.step);
  fmt::print(stderr, "pipetrain: resuming at step {} from {}\n", info.step, dir);
  return info.step;
}

void write_loss_plot(const std::string& path, const std::vector<std::pair<double, double>>& train,
                     const std::vector<std::pair<double, double>>& val) {
  const std::vector<PlotSeries> series = {{"train loss", "#1f77b4", train},
                                          {"validation loss", "#d62728", val}};
  write_file_atomically(path, render_line_plot_svg(series, "pipetrain: loss", "step", "loss (nats/token)"));
}

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

int configure_compute_threads(int64_t requested) {
  const int threads = requested > 0 ? static_cast<int>(requested) : cpu_cores();
  torch::set_num_threads(threads);
  return threads;
}

RunSummary run_training(const Config& config, const RunOptions& options) {
  make_model(config);  // an unknown model.kind: one line before anything is written
  const auto batches = make_batch_source(config, options.data_root);
  const auto codec = make_text_codec(config.data, options.data_root);
  const auto resume_point = read_resume_point(config, options);
  prepare_run_folder(options.run_dir, options.resume, options.overwrite);
  const fs::path dir(options.run_dir);
  if (!options.resume) write_file_atomically((dir / "config.toml").string(), to_toml(config));

  const int threads = configure_compute_threads(config.train.threads);
  fmt::print(stderr, "pipetrain: {} compute thread(s); BLAS: {}\n", threads,
             describe_blas(loaded_blas()));
  Trainer trainer(config, batches);
  fmt::print(stderr, "pipetrain: {}, {} parameters; data {}; run folder {}\n",
             trainer.model_definition().describe(), format_count(double(parameter_count(trainer.model()))),
             batches->describe(), options.run_dir);

  const int64_t first_step = restore(trainer, options, resume_point);
  if (options.resume) write_file_atomically((dir / "config.toml").string(), to_toml(config));  // it loaded
  install_stop_handlers();
  MetricsWriter metrics((dir / "metrics.jsonl").string(), /*append=*/options.resume);
  ProgressLine progress(config.train.steps, config.log.every);
  const double tokens_per_step = double(config.train.batch_size * batches->tokens_per_row());
  std::vector<std::pair<double, double>> train_curve, val_curve;
  RunSummary summary;
  const auto start = Clock::now();
  Validation validation;
  for (int64_t step = first_step; step < config.train.steps; ++step) {
    maybe_inject_fault(0, step, /*launched=*/false);
    const auto step_start = Clock::now();
    const StepResult result = trainer.train_step(step);
    const double step_seconds = seconds_since(step_start);
    const int64_t done = step + 1;
    if (!std::isfinite(result.loss)) {
      progress.finish();
      fail_non_finite_loss(result.loss, done, "stage 0, the single-process trainer", options.run_dir);
    }
    const bool last = done == config.train.steps;
    const bool validate = last || (config.eval.every > 0 && done % config.eval.every == 0);
    const double elapsed = seconds_since(start);
    const double tokens_per_s = tokens_per_step * double(done - first_step) / elapsed;
    nlohmann::json record = {{"step", done},          {"loss", result.loss},
                             {"lr", result.lr},       {"grad_norm", result.grad_norm},
                             {"tokens_per_s", tokens_per_s}, {"step_seconds", step_seconds},
                             {"elapsed_s", elapsed}};
    if (validate) {
      validation = trainer.evaluate();
      for (const auto& [name, value] : validation_fields(validation)) record[name] = value;
      val_curve.emplace_back(double(done), validation.loss);
    }
    train_curve.emplace_back(double(done), result.loss);
    if (validate || done % config.log.every == 0 || done == 1) metrics.write(record);
    if (options.progress) {
      std::string fields = fmt::format("loss {:.4f}", result.loss);
      fields += validation_progress(validation);
      fields += fmt::format(" | lr {:.2e} | {} tok/s", result.lr, format_count(tokens_per_s));
      progress.update(done, fields, elapsed / double(done - first_step));
    }
    summary.final_loss = result.loss;
    summary.tokens_per_s = tokens_per_s;
    const int stop = stop_signal();
    if (stop != 0 || periodic_checkpoint_due(config, done)) {
      const auto checkpoint = write_periodic_checkpoint(options.run_dir, trainer, config, done, validation.loss);
      if (stop != 0) {
        progress.finish();
        stop_after_checkpoint(stop, done, checkpoint, options.run_dir);
      }
    }
  }
  progress.finish();
  summary.steps = config.train.steps;
  summary.final_val_loss = validation.loss;
  summary.final_val_measures = validation.measures;
  summary.seconds = seconds_since(start);

  write_checkpoint((dir / "checkpoint").string(), trainer, config, config.train.steps, validation.loss);
  write_periodic_checkpoint(options.run_dir, trainer, config, config.train.steps, validation.loss);
  write_loss_plot((dir / "loss.svg").string(), train_curve, val_curve);
  summary.sample = sample_of(trainer.model(), config, codec.get());
  if (!summary.sample.empty()) write_file_atomically((dir / "sample.txt").string(), summary.sample + "\n");
  nlohmann::json summary_json = {{"steps", summary.steps},
                                 {"final_loss", summary.final_loss},
                                 {"tokens_per_s", summary.tokens_per_s},
                                 {"seconds", summary.seconds}};
  for (const auto& [name, value] : validation_fields(validation)) summary_json["final_" + name] = value;
  write_file_atomically((dir / "summary.json").string(), summary_json.dump(2) + "\n");
  return summary;
}

}  // namespace pipetrain
