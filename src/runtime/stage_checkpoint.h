#pragma once
// Checkpoints of a pipeline run: every worker of replica 0 writes its chunks' weights and
// optimizer state (stage<k>.safetensors, stage<k>.optimizer.safetensors), and the reporting
// worker completes the folder (checkpoint.json, rename, `latest`) once all are written.
#include <map>
#include <string>
#include <vector>

#include "io/checkpoint_dir.h"
#include "runtime/layout.h"
#include "runtime/partition.h"
#include "train/loss_scale.h"

namespace pipetrain::runtime {

class Comm;
class StageExecutor;  // forward declarations keep this header (and the launcher) free of torch

// This worker's stage files into `dir` (replica 0 only: the replicas hold the same weights)
// after `step` steps; no-flush stages add the weight versions a continuation reads. Returns the
// CRC32C of each file written, by name.
std::map<std::string, std::string> write_stage_files(const std::string& dir,
                                                     StageExecutor& executor,
                                                     const Layout& layout, int64_t step);

// Every file `info` lists with its CRC32C, from the workers that wrote them (`written`, as
// write_stage_files returns): a collective over every worker.
std::map<std::string, std::string> gather_checksums(Comm& comm, const CheckpointInfo& info,
                                                    const std::map<std::string, std::string>& written);

// The sidecar of a pipeline checkpoint whose stage files follow the naming above, with
// float16's loss scale (every worker holds the same one). `data`: data_fingerprint
// (train/checkpoint.h), needed only by the worker that commits the sidecar.
CheckpointInfo pipeline_checkpoint_info(const Config& config, int64_t step,
                                        const std::vector<StageRange>& ranges, double val_loss,
                                        const LossScale& loss_scale, const std::string& data);

// A periodic checkpoint, collective over every worker. Returns the completed folder.
std::string write_pipeline_checkpoint(const std::string& run_dir, StageExecutor& executor,
                                      Comm& comm, const Layout& layout, const Config& config,
                                      const std::vector<StageRange>& ranges,
                                      const std::string& data, int64_t step, double val_loss);

// UserError if no checkpoint of this config's weight policy can continue exactly.
void refuse_inexact_policy(const Config& config);

// UserError if the checkpoint cannot continue exactly under `config` (see read_checkpoint_for).
// `data`: data_fingerprint now.
void check_resumable(const std::string& checkpoint_dir, const Config& config,
                     const std::vector<StageRange>& ranges, const std::string& data);

// Loads this worker's chunks (weights, optimizer state, RNG) from a checkpoint of any
// partition (synchronous policies; no-flush policies: the same partition, with their
// checkpointed versions) and
// returns the step to continue at. `data`: data_fingerprint now ("" when the launcher checked).
int64_t restore_pipeline_state(const std::string& checkpoint_dir, StageExecutor& executor,
                               const Config& config, const std::vector<StageRange>& ranges,
                               const std::string& data);

}  // namespace pipetrain::runtime
