#include "train/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>

#include <filesystem>
#include <initializer_list>
#include <mutex>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "io/json_file.h"
#include "io/safetensors_file.h"
#include "model/state_io.h"
#include "schedule/run_rules.h"
#include "train/optim.h"

namespace fs = std::filesystem;

namespace pipetrain {
namespace {

std::vector<int64_t> model_shape(const ModelConfig& m) {
  return {m.layers, m.d_model, m.heads, m.seq_len, m.vocab_size};
}

std::string shape_text(const std::vector<int64_t>& s) {
  if (s.size() != 5) return "?";
  return fmt::format("{} layers, d_model {}, {} heads, seq_len {}, vocab {}", s[0], s[1], s[2], s[3], s[4]);
}


void append(std::vector<TensorEntry>& out, std::vector<TensorEntry>&& entries) {
  for (auto& entry : entries) out.push_back(std::move(entry));
}

// A stage holding a later copy of a shared parameter (GPT's head copy of the embedding) owns
// it and its optimizer state; a checkpoint of a stage holding the first copy stores it once,
// under the first copy's name. The entries of the later copies `held` (the module's parameter
// names) that `entries` lacks, made from the first copy's.
std::vector<TensorEntry> missing_shared_copies(const std::vector<TensorEntry>& entries,
                                               const std::vector<SharedParameter>& shared,
                                               const std::set<std::string>& held) {
  std::set<std::string> names;
  for (const auto& entry : entries) names.insert(entry.name);
  std::vector<TensorEntry> copies;
  for (const auto& group : shared) {
    const std::string& source = group.copies.at(0).name;
    for (size_t c = 1; c < group.copies.size(); ++c) {
      if (held.count(group.copies[c].name) == 0) continue;  // not this module's tensor
      for (const auto& entry : entries) {
        if (entry.name.rfind(source, 0) != 0) continue;
        const std::string alias = group.copies[c].name + entry.name.substr(source.size());
        if (names.count(alias) != 0) continue;
        copies.push_back(entry);
        copies.back().name = alias;
      }
    }
  }
  return copies;
}

// `entries` followed by `extra`, as one list; `entries` itself when there is nothing extra (a
// resume holds every tensor of the checkpoint: a copy of them all would double that).
const std::vector<TensorEntry>& followed_by(const std::vector<TensorEntry>& entries,
                                            std::vector<TensorEntry>& extra) {
  if (extra.empty()) return entries;
  extra.insert(extra.begin(), entries.begin(), entries.end());
  return extra;
}

}  // namespace

std::map<std::string, std::string> save_module_state(const std::string& dir,
                                                     const std::string& weights_file,
                                                     const std::string& optimizer_file,
                                                     torch::nn::Module& module,
                                                     torch::optim::Optimizer& optimizer) {
  return save_module_state(dir, weights_file, optimizer_file, module,
                           optimizer_state_tensors(optimizer, module));
}

std::map<std::string, std::string> save_module_state(
    const std::string& dir, const std::string& weights_file, const std::string& optimizer_file,
    torch::nn::Module& module,
    const std::vector<std::pair<std::string, torch::Tensor>>& optimizer_state) {
  return {{weights_file, write_checkpoint_file(dir, weights_file, module_tensors(module))},
          {optimizer_file, write_checkpoint_file(dir, optimizer_file, optimizer_state)}};
}

std::string write_checkpoint_file(const std::string& dir, const std::string& file,
                                  const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::vector<TensorLayout> layouts;
  for (const auto& [name, tensor] : tensors) {
    layouts.push_back({name, safetensors_dtype(tensor.scalar_type()), tensor.sizes().vec()});
  }
  SafetensorsFileWriter out((fs::path(dir) / file).string(), std::move(layouts));
  for (const auto& [name, tensor] : tensors) {
    const auto contiguous = tensor.detach().to(torch::kCPU).contiguous();  // itself if it is
    const auto* data = static_cast<const char*>(contiguous.data_ptr());  // null when empty
    out.write_tensor(data ? std::string_view(data, contiguous.nbytes()) : std::string_view());
  }
  return out.commit();
}

void record_loss_scale(CheckpointInfo& info, const LossScale& scale) {
  if (!scale.active()) return;
  info.loss_scale = scale.state().scale;
  info.loss_scale_good_steps = scale.state().good_steps;
  info.loss_scale_applied_steps = scale.state().applied_steps;
  info.loss_scale_previous = scale.state().previous_scale;
}

void restore_loss_scale(const CheckpointInfo& info, int64_t updates, LossScale& scale) {
  if (scale.active() && info.loss_scale > 0) {
    const double previous = info.loss_scale_previous > 0 ? info.loss_scale_previous : info.loss_scale;
    scale.restore({info.loss_scale, info.loss_scale_good_steps, info.loss_scale_applied_steps, previous},
                  updates);
  }
}

CheckpointInfo make_checkpoint_info(const Config& config, int64_t step,
                                    const std::vector<std::pair<int64_t, int64_t>>& partition,
                                    const std::string& data_fingerprint) {
  CheckpointInfo info;
  info.data_fingerprint = data_fingerprint;
  info.step = step;
  info.data_position = step;
  info.policy = schedule::policy_of(config);
  info.schedule = config.pipeline.stages > 1 || info.policy != "sync" ? config.pipeline.schedule : "single";
  info.stages = int64_t(partition.size());
  info.partition = partition;
  info.optimizer = config.train.optimizer;
  info.layers = partition.empty() ? 0 : partition.back().second;  // the model's layer count
  info.model_shape = model_shape(config.model);
  info.config_toml = to_toml(config);
  info.config_hash = config_hash(info.config_toml);
  info.rng_state = torch_rng_state_hex();
  info.weight_versions.resize(partition.size());
  return info;
}

namespace {

// The run's data file where it was, or moved away (its content is compared: refuse_other_data).
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  return a == b || fs::equivalent(a, b, error) || !fs::exists(a, error);
}

// What a field means: "auto" stands for what the model makes of it.
std::string meant_value(const Config& config, const std::string& key) {
  const ModelConfig& m = config.model;
  if (key == "model.activation") return m.activation == "gelu_tanh" ? "gelu_tanh" : "gelu";
  // 0 = the family's value: an explicit value equal to it changes nothing.
  if (key == "model.kv_heads") return std::to_string(key_value_heads(m));
  if (key == "model.ffn_hidden") return std::to_string(default_ffn_hidden(m));
  if (key == "model.positions") return std::to_string(position_rows(m));
  return field_value_string(config, *find_field(key));
}

// Whether `key` is a field whose 0 means a value derived from others (the family's MLP width of
// d_model, ...) and those others changed: the difference is theirs, which the model's shape (or
// its tensors) reports, not the field's.
bool base_changed(const Config& written, const Config& now, const std::string& key) {
  static const std::map<std::string, std::vector<std::string>> bases = {
      {"model.kv_heads", {"model.heads"}},
      {"model.ffn_hidden", {"model.kind", "model.d_model"}},
      {"model.positions", {"model.seq_len"}}};
  const auto found = bases.find(key);
  if (found == bases.end()) return false;
  for (const std::string& base : found->second) {
    if (meant_value(written, base) != meant_value(now, base)) return true;
  }
  return false;
}

// Each of `keys` whose meaning changed, as "key = now (whose: before)"; a data path that names
// the same file (or whose file was moved away) has not.
std::vector<std::string> changed_fields(const Config& written, const Config& now,
                                        std::initializer_list<const char*> keys, const std::string& whose) {
  std::vector<std::string> changed;
  for (const std::string key : keys) {
    const std::string before = meant_value(written, key), after = meant_value(now, key);
    if (before == after || base_changed(written, now, key) ||
        (key == "data.path" && same_file(written.data.path, now.data.path))) {
      continue;
    }
    changed.push_back(fmt::format("{} = {} ({}: {})", key, after, whose, before));
  }
  return changed;
}

}  // namespace

std::vector<std::string> changed_model_fields(const Config& written, const Config& now, const std::string& whose) {
  // The shape fields model_shape leaves out are named here too: a tensor-shape mismatch while
  // loading would name a tensor, not the setting.
  return changed_fields(written, now, {"model.norm_eps", "model.rope_theta", "model.rope_scaling", "model.activation",
                                       "model.torchscript", "model.max_labels", "model.kv_heads",
                                       "model.ffn_hidden", "model.positions"}, whose);
}

namespace {

// A resumed run continues its own stream of batches (train.seed, train.batch_size, the data) and
// its own held-out split: another value would make it another training (with another
// data.val_fraction it would train on what it validated on before).
void refuse_changed_meaning(const Config& written, const Config& now, const std::string& dir) {
  const std::vector<std::string> changed =
      changed_fields(written, now, {"train.seed", "train.batch_size", "data.format", "data.path",
                                    "data.val_fraction", "data.tokenizer"}, "the run's");
  if (changed.empty()) return;
  fail("{}: resuming with {} would train on other data than the run did; a resumed run continues "
       "its own seed, batches and held-out split (leave these out, or start a new run)", dir,
       join(changed, ", "));
}

void refuse_changed_model(const Config& written, const Config& now, const std::string& dir) {
  const std::vector<std::string> changed = changed_model_fields(written, now, "the run's");
  if (changed.empty()) return;
  fail("{}: resuming with {} would change what the run's model computes; a resumed run continues "
       "its own model (leave these out, or start a new run)", dir, join(changed, ", "));
}

// The same path rewritten, or another file where the run's was moved from: other tokens under
// the same batch positions. (Checkpoints before the fingerprint was recorded: not compared.)
void refuse_other_data(const CheckpointInfo& info, const std::string& now, const Config& config,
                       const std::string& dir) {
  if (info.data_fingerprint.empty() || now.empty() || info.data_fingerprint == now) return;
  fail("{}: data.path '{}' is not the data the run trained on (now {}; the run's: {}); a resumed "
       "run continues on its own data (put it back, or start a new run)", dir, config.data.path, now,
       info.data_fingerprint);
}

// Whether the run in `run_dir` wrote its summary at `step`: a summary of fewer steps is an
// earlier run's, which a resume with a larger train.steps went on from (an unreadable one
// counts as none: the finish writes it again).
bool summary_written_at(const std::string& run_dir, int64_t step) {
  const fs::path path = fs::path(run_dir) / "summary.json";
  if (!fs::exists(path)) return false;
  try {
    return parse_json_file(path.string()).value("steps", int64_t(-1)) == step;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

CheckpointInfo read_checkpoint_for(const std::string& dir, const Config& config,
                                   const std::vector<std::pair<int64_t, int64_t>>& partition,
                                   const std::string& data_fingerprint) {
  const std::string path = (fs::path(dir) / "checkpoint.json").string();
  if (!fs::exists(path)) fail("{}: missing (not a complete checkpoint)", path);
  CheckpointInfo info = parse_checkpoint_info(read_file(path), path);
  const Config written_config = parse_config_toml(info.config_toml, path);
  refuse_changed_meaning(written_config, config, dir);
  refuse_changed_model(written_config, config, dir);
  refuse_other_data(info, data_fingerprint, config, dir);
  const ModelConfig& written = written_config.model;
  if (written.kind != config.model.kind) {
    fail("{}: checkpoint of a '{}' model; model.kind is '{}'", dir, written.kind, config.model.kind);
  }
  if (info.model_shape != model_shape(config.model)) {
    fail("{}: checkpoint of a different model ({}); this run's model is {}", dir,
         shape_text(info.model_shape), shape_text(model_shape(config.model)));
  }
  if (head_is_tied(written) != head_is_tied(config.model)) {
    const auto name = [](bool tied) { return tied ? "tied" : "untied"; };
    fail("{}: checkpoint of a model whose head is {} to the embedding; model.head makes it {}: its "
         "trained head would be lost (set model.head = \"{}\")", dir, name(head_is_tied(written)),
         name(head_is_tied(config.model)), name(head_is_tied(written)));
  }
  // The tensors are in the writing run's model.dtype (its config, stored in the sidecar).
  const std::string& dtype = written.dtype;
  if (dtype != config.model.dtype) {
    fail("{}: checkpoint of a {} run; model.dtype is {}: a checkpoint continues in its own dtype "
         "(set model.dtype = \"{}\")", dir, dtype, config.model.dtype, dtype);
  }
  if (info.optimizer != config.train.optimizer) {
    fail("{}: checkpoint has {} optimizer state; train.optimizer is {}: cannot continue exactly",
         dir, info.optimizer, config.train.optimizer);
  }
  const std::string policy = schedule::policy_of(config);
  if (info.policy != policy) {
    fail("{}: checkpoint of weight policy '{}' cannot continue under policy '{}'", dir, info.policy, policy);
  }
  if (info.policy != "sync" && info.partition != partition) {
    fail("{}: weight policy '{}' keeps per-stage weight versions; loading them into another "
         "partition would not be exact (checkpoint: {} stages)", dir, info.policy, info.stages);
  }
  // At the last step, a run stopped before its summary (after the final checkpoint) finishes.
  const bool finished = summary_written_at(run_dir_of_checkpoint(dir), info.step);
  if (info.step > config.train.steps || (info.step == config.train.steps && finished)) {
    fail("{}: checkpoint is at step {}, the run has train.steps = {}: nothing to resume (raise "
         "--train.steps)", dir, info.step, config.train.steps);
  }
  return info;
}

CheckpointTensors read_checkpoint_tensors(const std::string& dir, const CheckpointInfo& info,
                                          const ParameterRoles& roles) {
  std::set<int64_t> every_layer;
  for (int64_t layer = 0; layer < info.layers; ++layer) every_layer.insert(layer);
  return read_checkpoint_tensors(dir, info, roles, every_layer);
}

CheckpointTensors read_checkpoint_tensors(const std::string& dir, const CheckpointInfo& info,
                                          const ParameterRoles& roles,
                                          const std::set<int64_t>& layers) {
  const std::string sidecar = (fs::path(dir) / "checkpoint.json").string();
  if (info.optimizer_files.size() != info.weight_versions.size()) {
    fail("{}: lists {} optimizer files for {} stages (damaged?)", sidecar,
         info.optimizer_files.size(), info.weight_versions.size());
  }
  // The optimizer the checkpoint was written with (SGD keeps momentum buffers only with momentum).
  TrainConfig written_with = parse_config_toml(info.config_toml, sidecar).train;
  written_with.optimizer = info.optimizer;
  CheckpointTensors tensors;
  for (size_t stage = 0; stage < info.weight_versions.size(); ++stage) {
    const auto [first, last] = info.partition.at(stage);
    if (layers.lower_bound(first) == layers.lower_bound(last)) continue;  // none of `layers`
    auto weights = read_checkpoint_file(dir, info.weight_versions[stage].front(), info);
    auto state = read_checkpoint_file(dir, info.optimizer_files[stage], info);
    // A float16 run whose every step overflowed has not stepped its optimizer: no state yet.
    const bool may_be_empty = info.loss_scale > 0 && info.loss_scale_applied_steps == 0;
    check_optimizer_state_entries(weights, state, written_with, roles,
                                  (fs::path(dir) / info.optimizer_files[stage]).string(),
                                  may_be_empty);
    append(tensors.weights, std::move(weights));
    append(tensors.optimizer, std::move(state));
  }
  return tensors;
}

void load_module_state(const CheckpointTensors& tensors, const std::string& origin,
                       torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       const std::vector<SharedParameter>& shared) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters()) named.emplace_back(item.key(), item.value());
  load_module_state(tensors, origin, module, optimizer, shared, named);
}

void load_module_state(const CheckpointTensors& tensors, const std::string& origin,
                       torch::nn::Module& module, torch::optim::Optimizer& optimizer,
                       const std::vector<SharedParameter>& shared,
                       const std::vector<std::pair<std::string, torch::Tensor>>& optimized) {
  std::set<std::string> held;
  for (const auto& item : module.named_parameters()) held.insert(item.key());
  auto shared_weights = missing_shared_copies(tensors.weights, shared, held);
  auto shared_state = missing_shared_copies(tensors.optimizer, shared, held);
  load_module_entries(module, followed_by(tensors.weights, shared_weights), origin);
  load_optimizer_state(optimizer, optimized, followed_by(tensors.optimizer, shared_state), origin);
}

std::string torch_rng_state_hex() {
  const auto state = at::detail::getDefaultCPUGenerator().get_state();  // contiguous uint8 tensor
  const auto* bytes = state.data_ptr<uint8_t>();
  std::string hex;
  hex.reserve(size_t(state.numel()) * 2);
  for (int64_t i = 0; i < state.numel(); ++i) hex += fmt::format("{:02x}", bytes[i]);
  return hex;
}

void restore_torch_rng_state(const std::string& hex, const std::string& origin) {
  const auto current = at::detail::getDefaultCPUGenerator().get_state();
  if (hex.size() != size_t(current.numel()) * 2) fail("{}: RNG state has the wrong size", origin);
  auto state = torch::empty_like(current);
  auto* bytes = state.data_ptr<uint8_t>();
  for (int64_t i = 0; i < state.numel(); ++i) {
    try {
      bytes[i] = uint8_t(std::stoul(hex.substr(size_t(i) * 2, 2), nullptr, 16));
    } catch (const std::exception&) {
      fail("{}: RNG state is not hex", origin);
    }
  }
  auto generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace pipetrain
