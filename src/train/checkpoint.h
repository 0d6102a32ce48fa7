#pragma once
// Saving and loading training state (weights, optimizer state, RNG) in a checkpoint folder
// (io/checkpoint_dir.h), for the single-process trainer and for each pipeline stage alike.
// Parameter names are global ("layer<i>.<name>"), so a stage loads its layers from the files of
// any partition: a synchronous run resumes onto a different stage count exactly as it was.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "io/checkpoint_dir.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "train/loss_scale.h"

namespace pipetrain {

// Writes `module`'s weights and optimizer state into `dir` as the two files named; returns
// their CRC32C by file name (CheckpointInfo::crc32c).
std::map<std::string, std::string> save_module_state(const std::string& dir,
                                                     const std::string& weights_file,
                                                     const std::string& optimizer_file,
                                                     torch::nn::Module& module,
                                                     torch::optim::Optimizer& optimizer);
// The same with the optimizer state already named (a pipeline's, a ZeRO-1 gather's).
std::map<std::string, std::string> save_module_state(
    const std::string& dir, const std::string& weights_file, const std::string& optimizer_file,
    torch::nn::Module& module,
    const std::vector<std::pair<std::string, torch::Tensor>>& optimizer_state);

// Writes `tensors` as the safetensors file `dir`/`file` (atomically) and returns its CRC32C.
// Each tensor's bytes go to disk from its own memory (one not contiguous on the CPU is made so
// alone): no copy of the file is held, a worker at its memory budget stays within it.
std::string write_checkpoint_file(const std::string& dir, const std::string& file,
                                  const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

// The sidecar for this config at `step` (schedule, partition, shape, hash, RNG, the data's
// fingerprint); the caller fills weight_versions / optimizer_files.
CheckpointInfo make_checkpoint_info(const Config& config, int64_t step,
                                    const std::vector<std::pair<int64_t, int64_t>>& partition,
                                    const std::string& data_fingerprint);

// Reads `dir`/checkpoint.json and refuses (UserError, with the reason) what cannot continue
// exactly under `config`: another model shape, model.dtype or optimizer, an asynchronous
// policy's weight versions on another partition, or other data (`data_fingerprint`, the data's
// now; "" = not compared, for a worker whose launcher compared it).
// The model fields that change what a model computes beyond the shape read_checkpoint_for
// compares (layers, d_model, heads, seq_len, vocab): activation, norm epsilon, rotary base and
// scaling, ..., and the shapes it leaves out (key/value heads, MLP width, position rows, which
// would otherwise surface as a tensor that does not fit), where `now` differs from `written`,
// each as "key = NOW (WHOSE: WRITTEN)". ("auto" and 0 compare as what they mean, a 0 only when
// what it derives from is unchanged; the loss's chunking and the transducer loss's method
// compute the same: not listed.)
std::vector<std::string> changed_model_fields(const Config& written, const Config& now, const std::string& whose);

CheckpointInfo read_checkpoint_for(const std::string& dir, const Config& config,
                                   const std::vector<std::pair<int64_t, int64_t>>& partition,
                                   const std::string& data_fingerprint);

// Every tensor of the checkpoint's weight files (newest version) and optimizer files, the
// optimizer state checked against the weights (`roles`: the model's, for Muon's matrices).
struct CheckpointTensors {
  std::vector<TensorEntry> weights, optimizer;
};
CheckpointTensors read_checkpoint_tensors(const std::string& dir, const CheckpointInfo& info,
                                          const ParameterRoles& roles);
// The same from only the checkpoint stages whose layers include one of `layers` (a pipeline
// worker reads the files of its own layers, not the whole model's).
CheckpointTensors read_checkpoint_tensors(const std::string& dir, const CheckpointInfo& info,
                                          const ParameterRoles& roles,
                                          const std::set<int64_t>& layers);

// Loads `module`'s parameters and their optimizer state (step counts, moments, momentum).
// A later copy of a `shared` parameter (a pipeline head's own copy of GPT's embedding) missing
// from the checkpoint is filled from the first copy (a run whose stage held both layers).
void load_module_state(const CheckpointTensors& tensors, const std::string& origin,
                       torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       const std::vector<SharedParameter>& shared);
// The same when the optimizer updates tensors of its own (`optimized`, named as the module's
// parameters and sharing their storage: a no-flush pipeline stage's masters).
void load_module_state(const CheckpointTensors& tensors, const std::string& origin,
                       torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       const std::vector<SharedParameter>& shared,
                       const std::vector<std::pair<std::string, torch::Tensor>>& optimized);

// Float16's dynamic loss scale into the sidecar, and back from it, taken after `updates` updates
// (a checkpoint without one, of another precision, leaves the scale as the config starts it).
void record_loss_scale(CheckpointInfo& info, const LossScale& scale);
void restore_loss_scale(const CheckpointInfo& info, int64_t updates, LossScale& scale);

std::string torch_rng_state_hex();
void restore_torch_rng_state(const std::string& hex, const std::string& origin);

}  // namespace pipetrain
