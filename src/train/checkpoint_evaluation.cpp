#include "train/checkpoint_evaluation.h"

#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "io/checkpoint_dir.h"
#include "model/registry.h"
#include "core/text.h"
#include "model/state_io.h"
#include "train/checkpoint.h"
#include "train/evaluation.h"
#include "train/trainer.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kEvaluationExampleRows = 5;  // as many as a run's sample shows

CheckpointInfo read_evaluated_info(const std::string& checkpoint_dir) {
  const fs::path sidecar = fs::path(checkpoint_dir) / "checkpoint.json";
  require_folder(checkpoint_dir, "checkpoint folder", "checkpoint.json");
  if (!fs::exists(sidecar)) {
    fail("'{}' is not a checkpoint folder (no checkpoint.json)", checkpoint_dir);
  }
  return parse_checkpoint_info(read_file(sidecar.string()), sidecar.string());
}

// Every stage's newest weight version: a pipeline checkpoint holds one file per stage.
std::vector<TensorEntry> weights_of(const std::string& dir, const CheckpointInfo& info) {
  std::vector<TensorEntry> weights;
  for (const auto& versions : info.weight_versions) {
    if (versions.empty()) fail("{}/checkpoint.json: a stage lists no weight file", dir);
    for (auto& entry : read_checkpoint_file(dir, versions.front(), info)) weights.push_back(std::move(entry));
  }
  return weights;
}

// The checkpoint's own run configured its model as `config` does (changed_model_fields).
void require_model_of(const Config& config, const CheckpointInfo& info, const std::string& checkpoint_dir) {
  const Config written = parse_config_toml(info.config_toml, checkpoint_dir + "/checkpoint.json");
  const std::vector<std::string> changed = changed_model_fields(written, config, "the checkpoint's");
  if (changed.empty()) return;
  fail("{}: its weights were trained as another model than this config describes: {} (leave the "
       "overrides out, or give the run folder the checkpoint belongs to)", checkpoint_dir, join(changed, ", "));
}

}  // namespace

std::string newest_checkpoint(const std::string& run_dir) {
  require_folder(run_dir, "run folder", "config.toml and the checkpoints");
  const std::string final_dir = (fs::path(run_dir) / "checkpoint").string();
  const std::string periodic = latest_checkpoint_or_empty(run_dir);
  const bool has_final = fs::exists(fs::path(final_dir) / "checkpoint.json");
  if (!has_final && periodic.empty()) {
    fail("run folder '{}' has no checkpoint (neither checkpoint/ nor checkpoints/latest)", run_dir);
  }
  if (!has_final) return periodic;
  if (periodic.empty()) return final_dir;
  return read_evaluated_info(periodic).step > read_evaluated_info(final_dir).step ? periodic : final_dir;
}

void require_checkpoint_of_model(const Config& config, const std::string& checkpoint_dir) {
  require_model_of(config, read_evaluated_info(checkpoint_dir), checkpoint_dir);
}

std::vector<TensorEntry> checkpoint_weights(const std::string& checkpoint_dir) {
  return weights_of(checkpoint_dir, read_evaluated_info(checkpoint_dir));
}

int64_t checkpoint_step(const std::string& checkpoint_dir) {
  return read_evaluated_info(checkpoint_dir).step;
}

CheckpointEvaluation evaluate_checkpoint(const Config& config, const std::string& checkpoint_dir,
                                         const std::string& data_root,
                                         const std::function<void(int64_t, int64_t)>& after_batch) {
  CheckpointEvaluation result;
  result.checkpoint = checkpoint_dir;
  const CheckpointInfo info = read_evaluated_info(checkpoint_dir);
  require_model_of(config, info, checkpoint_dir);
  result.step = info.step;
  const auto batches = make_batch_source(config, data_root);
  result.data = batches->describe();
  Config evaluating = config;
  evaluating.train.cuda_graphs = 0;  // graphs replay training steps; a run's evaluation takes none
  Trainer trainer(evaluating, batches);
  load_module_entries(trainer.model(), weights_of(checkpoint_dir, info), checkpoint_dir);
  result.validation = trainer.evaluate(/*stoppable=*/false, after_batch);
  torch::NoGradGuard no_grad;
  EvalMode eval_mode(trainer.model());
  result.examples = trainer.model().describe_examples(
      batches->val_batch(0, kEvaluationExampleRows), kEvaluationExampleRows);
  return result;
}

}  // namespace pipetrain
