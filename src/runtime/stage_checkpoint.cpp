#include "runtime/stage_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "runtime/comm.h"
#include "runtime/stage_executor.h"
#include "schedule/generators.h"
#include "schedule/run_rules.h"
#include "train/checkpoint.h"

namespace fs = std::filesystem;

namespace pipetrain::runtime {
namespace {

std::vector<std::pair<int64_t, int64_t>> as_pairs(const std::vector<StageRange>& ranges) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& r : ranges) out.emplace_back(r.first, r.last);
  return out;
}

// A checkpointed weight version of a no-flush stage (stage<k>.safetensors holds the masters).
std::string version_file(int stage, int version) {
  return fmt::format("stage{}.version{}.safetensors", stage, version);
}

// The chunk's checkpointed versions, as WeightVersions::resume takes them.
std::map<int, std::vector<torch::Tensor>> read_version_files(const std::string& dir,
                                                             const CheckpointInfo& info,
                                                             const StageExecutor::Chunk& chunk,
                                                             const std::vector<int>& versions) {
  std::map<int, std::vector<torch::Tensor>> out;
  for (const int version : versions) {
    const auto path = (fs::path(dir) / version_file(chunk.stage, version)).string();
    std::map<std::string, TensorEntry> by_name;
    for (auto& entry : read_checkpoint_file(dir, version_file(chunk.stage, version), info)) {
      by_name[entry.name] = entry;
    }
    for (const auto& item : chunk.model->named_parameters()) {
      const auto it = by_name.find(item.key());
      if (it == by_name.end()) fail("{}: has no tensor '{}'", path, item.key());
      out[version].push_back(from_entry_like(it->second, item.value(), path));
    }
  }
  return out;
}

// Every stashed version a continuation reads is listed and readable (before any worker starts).
void check_version_files(const std::string& dir, const CheckpointInfo& info, const Config& config) {
  for (size_t stage = 0; stage < info.weight_versions.size(); ++stage) {
    const auto& listed = info.weight_versions[stage];
    for (const int version : schedule::checkpointed_versions(config, int(stage), info.step)) {
      const std::string name = version_file(int(stage), version);
      if (std::find(listed.begin(), listed.end(), name) == listed.end()) {
        // Only the latest weights: a final checkpoint of an older pipetrain, which let the
        // pipeline drain without keeping what a continuation reads.
        const std::string drained = listed.size() == 1
                                        ? "; this final checkpoint holds none (written by a pipetrain "
                                          "that let the pipeline drain): continue from a checkpoint "
                                          "taken before the last step"
                                        : "";
        fail("{}: lists no weight version {} of stage {}, which a '{}' run reads after step {}{}",
             dir, version, stage, info.policy, info.step, drained);
      }
      read_checkpoint_file(dir, name, info);
    }
  }
}


// Every weight of the model is in the checkpoint with its shape (not, say, a stage file of a
// wider model): found here, before the launcher rewrites config.toml, not in each worker after.
void check_weight_shapes(const std::string& dir, const CheckpointTensors& tensors, const Model& model) {
  load_module_entries(*model.make_whole(), tensors.weights, dir);  // UserError naming the first mismatch
}

// A per-microbatch policy's update i sums every replica's microbatch i: on another width its
// updates cover other rows of the batch, another training (per-iteration updates cover the whole
// batch at any width).
void check_width(const std::string& dir, const CheckpointInfo& info, const Config& config) {
  const int64_t written = parse_config_toml(info.config_toml, dir).pipeline.dp_width;
  if (written == config.pipeline.dp_width) return;
  if (!schedule::schedule_entry(config.pipeline.schedule).updates_per_microbatch()) return;
  fail("{}: checkpoint of a '{}' run with pipeline.dp_width = {}; this run has {}: its updates "
       "after every microbatch would sum other rows of each batch (resume with --dp-width {})",
       dir, info.policy, written, config.pipeline.dp_width, written);
}

// The layers whose checkpointed tensors this worker loads: its chunks', and every copy of a
// shared parameter one of them holds (a head's copy may be stored only as the embedding).
std::set<int64_t> layers_to_load(const StageExecutor& executor, const std::vector<StageRange>& ranges) {
  std::set<int64_t> layers;
  for (const auto& chunk : executor.chunks()) {
    const StageRange& range = ranges.at(size_t(chunk.stage));
    for (int64_t layer = range.first; layer < range.last; ++layer) layers.insert(layer);
  }
  for (const auto& group : executor.model_definition().shared_parameters()) {
    const bool held = std::any_of(group.copies.begin(), group.copies.end(), [&](const auto& copy) {
      return layers.count(copy.layer) != 0;
    });
    if (!held) continue;
    for (const auto& copy : group.copies) layers.insert(copy.layer);
  }
  return layers;
}

}  // namespace

// Every listed file's CRC32C at every worker, from the workers that wrote them (a stage's
// files may be on another node): one sum over a slot per file, CRC + 1 from its writer.
std::map<std::string, std::string> gather_checksums(Comm& comm, const CheckpointInfo& info,
                                                    const std::map<std::string, std::string>& written) {
  std::vector<std::string> files = info.optimizer_files;
  for (const auto& versions : info.weight_versions) files.insert(files.end(), versions.begin(), versions.end());
  auto slots = torch::zeros({int64_t(files.size())}, torch::kFloat64);
  for (size_t i = 0; i < files.size(); ++i) {
    const auto it = written.find(files[i]);
    if (it != written.end()) slots[int64_t(i)] = double(std::stoul(it->second, nullptr, 16)) + 1;
  }
  comm.all_reduce_sum(slots, Comm::kWorld);
  std::map<std::string, std::string> checksums;
  for (size_t i = 0; i < files.size(); ++i) {
    const double value = slots[int64_t(i)].item<double>();
    if (value < 1) fail("checkpoint: no worker wrote '{}'", files[i]);
    checksums[files[i]] = fmt::format("{:08x}", uint32_t(value - 1));
  }
  return checksums;
}

std::map<std::string, std::string> write_stage_files(const std::string& dir,
                                                     StageExecutor& executor,
                                                     const Layout& layout, int64_t step) {
  if (layout.replica() == 0) fs::create_directories(dir);  // a node with its own run folder
  executor.point_at_latest_weights();  // between steps the modules may show a stashed version
  std::map<std::string, std::string> checksums;
  for (const auto& chunk : executor.chunks()) {
    // Every replica takes part (with ZeRO-1 the state is gathered from the replicas' shards);
    // replica 0 writes: the replicas hold the same weights.
    const auto state = executor.optimizer_state(chunk);
    if (layout.replica() != 0) continue;
    checksums.merge(save_module_state(dir, fmt::format("stage{}.safetensors", chunk.stage),
                                      fmt::format("stage{}.optimizer.safetensors", chunk.stage),
                                      *chunk.model, state));
    for (const int version : executor.checkpointed_versions(chunk, step)) {
      checksums[version_file(chunk.stage, version)] =
          write_checkpoint_file(dir, version_file(chunk.stage, version), executor.stashed_version(chunk, version));
    }
  }
  return checksums;
}

CheckpointInfo pipeline_checkpoint_info(const Config& config, int64_t step,
                                        const std::vector<StageRange>& ranges, double val_loss,
                                        const LossScale& loss_scale, const std::string& data) {
  CheckpointInfo info = make_checkpoint_info(config, step, as_pairs(ranges), data);
  info.val_loss = val_loss;
  record_loss_scale(info, loss_scale);  // the same on every worker
  for (size_t s = 0; s < ranges.size(); ++s) {
    info.weight_versions[s] = {fmt::format("stage{}.safetensors", s)};  // the newest: masters
    for (const int version : schedule::checkpointed_versions(config, int(s), step)) {
      info.weight_versions[s].push_back(version_file(int(s), version));
    }
    info.optimizer_files.push_back(fmt::format("stage{}.optimizer.safetensors", s));
  }
  return info;
}

std::string write_pipeline_checkpoint(const std::string& run_dir, StageExecutor& executor,
                                      Comm& comm, const Layout& layout, const Config& config,
                                      const std::vector<StageRange>& ranges,
                                      const std::string& data, int64_t step, double val_loss) {
  const fs::path partial = fs::path(checkpoints_root(run_dir)) / (step_dir_name(step) + ".partial");
  if (layout.reports()) begin_checkpoint(run_dir, step);
  comm.barrier();  // the folder exists (and is empty)
  CheckpointInfo info = pipeline_checkpoint_info(config, step, ranges, val_loss, executor.loss_scale(), data);
  // Also the barrier "every stage file is written": a sum completes once every worker adds in.
  info.crc32c = gather_checksums(comm, info, write_stage_files(partial.string(), executor, layout, step));
  if (!layout.reports()) return (fs::path(checkpoints_root(run_dir)) / step_dir_name(step)).string();
  return commit_checkpoint(run_dir, info, config.checkpoint.keep);
}

void refuse_inexact_policy(const Config& config) {
  const std::string refusal = schedule::resume_refusal(schedule::policy_of(config));
  if (!refusal.empty()) fail("--resume cannot continue exactly: {}", refusal);
}

void check_resumable(const std::string& checkpoint_dir, const Config& config,
                     const std::vector<StageRange>& ranges, const std::string& data) {
  refuse_inexact_policy(config);
  const CheckpointInfo info = read_checkpoint_for(checkpoint_dir, config, as_pairs(ranges), data);
  check_width(checkpoint_dir, info, config);
  const auto model = make_model(config);
  // Present and well-formed:
  const auto tensors = read_checkpoint_tensors(checkpoint_dir, info, roles_of(*model));
  check_weight_shapes(checkpoint_dir, tensors, *model);
  check_version_files(checkpoint_dir, info, config);
}

int64_t restore_pipeline_state(const std::string& checkpoint_dir, StageExecutor& executor,
                               const Config& config, const std::vector<StageRange>& ranges,
                               const std::string& data) {
  refuse_inexact_policy(config);  // workers started without the launcher's check
  const CheckpointInfo info = read_checkpoint_for(checkpoint_dir, config, as_pairs(ranges), data);
  const auto tensors = read_checkpoint_tensors(checkpoint_dir, info, roles_of(executor.model_definition()),
                                               layers_to_load(executor, ranges));
  executor.load_state(tensors, checkpoint_dir);
  std::vector<std::map<int, std::vector<torch::Tensor>>> stashed;
  for (const auto& chunk : executor.chunks()) {
    stashed.push_back(read_version_files(checkpoint_dir, info, chunk,
                                         executor.checkpointed_versions(chunk, info.step)));
  }
  executor.resume_at(info.step, std::move(stashed));
  restore_torch_rng_state(info.rng_state, checkpoint_dir);
  restore_loss_scale(info, executor.updates_before(info.step), executor.loss_scale());
  return info.step;
}

}  // namespace pipetrain::runtime
