#include "runtime/stage_checkpoint.h"

#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "runtime/comm.h"
#include "runtime/stage_executor.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;

namespace pipetrain::runtime {
namespace {

std::vector<std::pair<int64_t, int64_t>> as_pairs(const std::vector<StageRange>& ranges) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& r : ranges) out.emplace_back(r.first, r.last);
  return out;
}

}  // namespace

void write_stage_files(const std::string& dir, StageExecutor& executor, const Layout& layout) {
  if (layout.replica() == 0) fs::create_directories(dir);  // a node with its own run folder
  for (const auto& chunk : executor.chunks()) {
    // Every replica takes part (with ZeRO-1 the state is gathered from the replicas' shards);
    // replica 0 writes: the replicas hold the same weights.
    const auto state = executor.optimizer_state(chunk);
    if (layout.replica() != 0) continue;
    save_module_state(dir, fmt::format("stage{}.safetensors", chunk.stage),
                      fmt::format("stage{}.optimizer.safetensors", chunk.stage), *chunk.model,
                      state);
  }
}

CheckpointInfo pipeline_checkpoint_info(const Config& config, int64_t step,
                                        const std::vector<StageRange>& ranges, double val_loss) {
  CheckpointInfo info = make_checkpoint_info(config, step, as_pairs(ranges));
  info.val_loss = val_loss;
  for (size_t s = 0; s < ranges.size(); ++s) {
    info.weight_versions[s] = {fmt::format("stage{}.safetensors", s)};
    info.optimizer_files.push_back(fmt::format("stage{}.optimizer.safetensors", s));
  }
  return info;
}

std::string write_pipeline_checkpoint(const std::string& run_dir, StageExecutor& executor,
                                      Comm& comm, const Layout& layout, const Config& config,
                                      const std::vector<StageRange>& ranges, int64_t step,
                                      double val_loss) {
  const fs::path partial = fs::path(checkpoints_root(run_dir)) / (step_dir_name(step) + ".partial");
  if (layout.reports()) begin_checkpoint(run_dir, step);
  comm.barrier();  // the folder exists (and is empty)
  write_stage_files(partial.string(), executor, layout);
  comm.barrier();  // every stage file is written
  if (!layout.reports()) return (fs::path(checkpoints_root(run_dir)) / step_dir_name(step)).string();
  return commit_checkpoint(run_dir, pipeline_checkpoint_info(config, step, ranges, val_loss),
                           config.checkpoint.keep);
}

void check_resumable(const std::string& checkpoint_dir, const Config& config,
                     const std::vector<StageRange>& ranges) {
  if (config.pipeline.zero1 == 1) {
    fail("--resume does not support ZeRO-1 runs yet (pipeline.zero1 = 1): the checkpoint holds the "
         "gathered optimizer state, which the sharded optimizer cannot load back yet");
  }
  if (policy_of(config) != "sync") {
    fail("--resume needs a synchronous schedule (gpipe, 1f1b, interleaved); '{}' keeps "
         "microbatches in flight across steps", config.pipeline.schedule);
  }
  const CheckpointInfo info = read_checkpoint_for(checkpoint_dir, config, as_pairs(ranges));
  read_checkpoint_tensors(checkpoint_dir, info);  // every file present and well-formed
}

int64_t restore_pipeline_state(const std::string& checkpoint_dir, StageExecutor& executor,
                               const Config& config, const std::vector<StageRange>& ranges) {
  const CheckpointInfo info = read_checkpoint_for(checkpoint_dir, config, as_pairs(ranges));
  const auto tensors = read_checkpoint_tensors(checkpoint_dir, info);
  const std::string head_copy = fmt::format("layer{}.tied_weight", config.model.layers + 1);
  for (const auto& chunk : executor.chunks()) {
    load_module_state(tensors, checkpoint_dir, *chunk.model, executor.optimizer(), head_copy);
  }
  restore_torch_rng_state(info.rng_state, checkpoint_dir);
  return info.step;
}

}  // namespace pipetrain::runtime
