#pragma once
// `pipetrain evaluate`: a run's checkpoint (single-process or pipeline: the format is shared)
// loaded into the whole model in one process, and validated as training validates
// (Trainer::evaluate: eval.batches batches of train.batch_size rows of the held-out split).
// Free of libtorch headers so the CLI compiles fast.
#include <cstdint>
#include <functional>
#include <string>

#include <vector>

#include "core/config.h"
#include "io/safetensors.h"
#include "train/step_result.h"

namespace pipetrain {

// The newest checkpoint of a run folder by step: its final checkpoint/ or the periodic one
// checkpoints/latest names (the final one on a tie). UserError if the folder has neither.
std::string newest_checkpoint(const std::string& run_dir);

// Every stage's newest weights of a checkpoint folder (single-process or pipeline), as
// single-process parameter names; UserError when it is not a checkpoint folder.
std::vector<TensorEntry> checkpoint_weights(const std::string& checkpoint_dir);
// UserError when the checkpoint's own run configured its model otherwise than `config` does in
// its fields (activation, norm epsilon, rotary base, MLP width, ...: changed_model_fields).
void require_checkpoint_of_model(const Config& config, const std::string& checkpoint_dir);
int64_t checkpoint_step(const std::string& checkpoint_dir);

struct CheckpointEvaluation {
  std::string checkpoint;  // the folder read
  int64_t step = 0;        // optimizer steps its weights have taken
  std::string data;        // the batch source's description
  Validation validation;   // loss and the model's measures
  std::string examples;    // a few validation rows in words (a recognizer's transcripts), or ""
};

// Evaluates the weights of `checkpoint_dir` (UserError when it is not a checkpoint folder or
// its weights do not fit the model `config` describes) on `config`'s data; relative data paths
// are also looked up below `data_root`.
// `after_batch(done, total)` after each validation batch (a progress line), if given.
CheckpointEvaluation evaluate_checkpoint(const Config& config, const std::string& checkpoint_dir,
                                         const std::string& data_root,
                                         const std::function<void(int64_t, int64_t)>& after_batch = {});

}  // namespace pipetrain
