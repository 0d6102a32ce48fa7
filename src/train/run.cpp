#include "train/run.h"

#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/machine.h"
#include "core/stop_signal.h"
#include "core/text.h"
#include "device/torch_build.h"
#include "data/text_codec.h"
#include "io/checkpoint_dir.h"
#include "io/content_fingerprint.h"
#include "io/run_folder.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "train/run_control.h"
#include "train/sample.h"
#include "train/trainer.h"
#include "train/training_loop.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

// Weights + optimizer state into `dir`; returns the sidecar describing them.
CheckpointInfo write_state(const std::string& dir, Trainer& trainer, const Config& config,
                           const std::string& data, int64_t step, double val_loss) {
  const auto checksums = save_module_state(dir, "model.safetensors", "optimizer.safetensors",
                                           trainer.model(), trainer.optimizer());
  CheckpointInfo info =
      make_checkpoint_info(config, step, {{0, trainer.model_definition().layer_count()}}, data);
  info.crc32c = checksums;
  info.val_loss = val_loss;
  info.weight_versions = {{"model.safetensors"}};
  info.optimizer_files = {"optimizer.safetensors"};
  record_loss_scale(info, trainer.loss_scale());
  return info;
}

// The run folder's checkpoint/ (the final state, the documented place of model.safetensors).
void write_checkpoint(const std::string& dir, Trainer& trainer, const Config& config,
                      const std::string& data, int64_t step, double val_loss) {
  fs::create_directories(dir);
  const CheckpointInfo info = write_state(dir, trainer, config, data, step, val_loss);
  write_file_atomically((fs::path(dir) / "checkpoint.json").string(), checkpoint_info_json(info));
}

// RUN_DIR/checkpoints/step-N/, made complete and `latest` before older ones are dropped.
std::string write_periodic_checkpoint(const std::string& run_dir, Trainer& trainer,
                                      const Config& config, const std::string& data, int64_t step,
                                      double val_loss) {
  const std::string partial = begin_checkpoint(run_dir, step);
  return commit_checkpoint(run_dir, write_state(partial, trainer, config, data, step, val_loss),
                           config.checkpoint.keep);
}

// A resumed run's checkpoint, read and checked before anything starts.
struct ResumePoint {
  std::string dir;
  CheckpointInfo info;
  CheckpointTensors tensors;
};

std::optional<ResumePoint> read_resume_point(const Config& config, const RunOptions& options,
                                             const std::string& data) {
  if (!options.resume) return std::nullopt;
  ResumePoint point;
  point.dir = latest_checkpoint(options.run_dir);
  const auto model = make_model(config);
  point.info = read_checkpoint_for(point.dir, config, {{0, model->layer_count()}}, data);
  point.tensors = read_checkpoint_tensors(point.dir, point.info, roles_of(*model));
  return point;
}

// The step a resumed run continues from (0 for a new run), with the trainer's state loaded.
int64_t restore(Trainer& trainer, const Config& config, const RunOptions& options,
                const std::optional<ResumePoint>& point) {
  if (!point) return 0;
  const std::string& dir = point->dir;
  const CheckpointInfo& info = point->info;
  load_module_state(point->tensors, dir, trainer.model(), trainer.optimizer(),
                    trainer.model_definition().shared_parameters());
  restore_torch_rng_state(info.rng_state, dir);
  restore_loss_scale(info, info.step, trainer.loss_scale());  // an update a step
  keep_metrics_up_to((fs::path(options.run_dir) / "metrics.jsonl").string(), info.step);
  fmt::print(stderr, "{}\n", resuming_line(info.step, config.train.steps, dir));
  return info.step;
}

// The single-process trainer behind the shared loop.
class SingleProcessSession : public TrainingSession {
 public:
  SingleProcessSession(const Config& config, const RunOptions& options, std::string data,
                       Trainer& trainer, const TextCodec* codec, const BatchSource& batches)
      : config_(config), options_(options), data_(std::move(data)), trainer_(trainer),
        codec_(codec), batches_(batches) {}
  bool reports() const override { return true; }
  int rank() const override { return 0; }
  StepResult train_step(int64_t step) override { return trainer_.train_step(step); }
  nlohmann::json step_fields(bool) override { return nlohmann::json::object(); }
  Validation evaluate(bool stoppable) override { return trainer_.evaluate(stoppable); }
  StopVerdict stop_verdict(int64_t done, double loss, bool) override {
    return {stop_signal(), !std::isfinite(loss), done, loss};
  }
  std::string save_checkpoint(int64_t done, double val_loss) override {
    return write_periodic_checkpoint(options_.run_dir, trainer_, config_, data_, done, val_loss);
  }
  Finished finish(double val_loss) override {
    const fs::path dir(options_.run_dir);
    write_checkpoint((dir / "checkpoint").string(), trainer_, config_, data_, config_.train.steps, val_loss);
    write_periodic_checkpoint(options_.run_dir, trainer_, config_, data_, config_.train.steps, val_loss);
    return {sample_of(trainer_.model(), config_, codec_, batches_), "", nlohmann::json::object()};
  }
  std::string loss_stage() const override { return "stage 0, the single-process trainer"; }

 private:
  const Config& config_;
  const RunOptions& options_;
  const std::string data_;  // data_fingerprint when the run started
  Trainer& trainer_;
  const TextCodec* codec_;  // none for data that is not text
  const BatchSource& batches_;
};

}  // namespace

int configure_compute_threads(int64_t requested) {
  const int threads = requested > 0 ? static_cast<int>(requested) : cpu_cores();
  torch::set_num_threads(threads);
  return threads;
}

RunSummary run_training(const Config& config, const RunOptions& options) {
  make_model(config);  // an unknown model.kind: one line before anything is written
  const auto batches = make_batch_source(config, options.data_root);
  const auto codec = make_text_codec(config.data, options.data_root);
  if (options.resume) refuse_run_folder_in_use(options.run_dir);
  const std::string data = data_fingerprint(config.data.path, options.data_root);
  const auto resume_point = read_resume_point(config, options, data);
  const RunFolderLock folder_lock = prepare_run_folder(options.run_dir, options.resume, options.overwrite);
  const fs::path dir(options.run_dir);
  if (!options.resume) write_file_atomically((dir / "config.toml").string(), to_toml(config));

  const int threads = configure_compute_threads(config.train.threads);
  Trainer trainer(config, batches);
  fmt::print(stderr, "pipetrain: {}, {} compute thread(s); {}\n", device::describe(trainer.execution()),
             threads, describe(torch_build()));
  fmt::print(stderr, "pipetrain: {}, {} parameters; data {}; run folder {}\n",
             trainer.model_definition().describe(), format_count(double(parameter_count(trainer.model()))),
             batches->describe(), options.run_dir);

  const int64_t first_step = restore(trainer, config, options, resume_point);
  if (options.resume) write_file_atomically((dir / "config.toml").string(), to_toml(config));  // it loaded
  install_stop_handlers();
  SingleProcessSession session(config, options, data, trainer, codec.get(), *batches);
  return *run_training_loop(config, session,
                            loop_settings(config, batches.get(), options.run_dir, first_step, options.progress));
}

}  // namespace pipetrain
