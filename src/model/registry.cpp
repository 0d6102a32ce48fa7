#include "model/registry.h"

#include <utility>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "data/dataset.h"
#include "model/gpt_model.h"
#include "model/tensor_file_batch.h"
#include "model/token_batch.h"
#include "model/torchscript_model.h"

namespace pipetrain {
namespace {

template <typename Factory>
using Named = std::vector<std::pair<std::string, Factory>>;

std::shared_ptr<const BatchSource> token_windows(const Config& config, const std::string& data_root) {
  return std::make_shared<TokenBatchSource>(make_dataset(config, data_root),
                                            resolve_existing_path(config.data.path, data_root));
}

Named<ModelFactory>& model_factories() {
  static Named<ModelFactory> factories = {
      {"gpt",
       [](const Config& config) {
         return std::make_shared<GptModel>(gpt_config_from(config.model), uint64_t(config.train.seed));
       }},
      {"torchscript", make_torchscript_model},
  };
  return factories;
}

Named<BatchSourceFactory>& batch_factories() {
  static Named<BatchSourceFactory> factories = {{"bytes", token_windows},
                                                  {"tokens", token_windows},
                                                  {"safetensors", make_tensor_file_batches}};
  return factories;
}

template <typename Factory>
void add_named(Named<Factory>& table, const std::string& what, const std::string& name, Factory factory) {
  for (const auto& entry : table) {
    if (entry.first == name) fail("{} '{}' is registered twice", what, name);
  }
  table.emplace_back(name, std::move(factory));
}

template <typename Factory>
std::vector<std::string> names_of(const Named<Factory>& table) {
  std::vector<std::string> names;
  for (const auto& entry : table) names.push_back(entry.first);
  return names;
}

template <typename Factory>
const Factory& find_named(const Named<Factory>& table, const std::string& field, const std::string& name) {
  for (const auto& entry : table) {
    if (entry.first == name) return entry.second;
  }
  fail("{} must be one of {}, got '{}'", field, join(names_of(table), ", "), name);
}

}  // namespace

void register_model_kind(const std::string& name, ModelFactory factory) {
  add_named(model_factories(), "model kind", name, std::move(factory));
}

void register_data_format(const std::string& name, BatchSourceFactory factory) {
  add_named(batch_factories(), "data format", name, std::move(factory));
}

torch::ScalarType compute_dtype(const ModelConfig& model) {
  if (model.dtype == "float32") return torch::kFloat32;
  if (model.dtype == "float64") return torch::kFloat64;
  fail("model.dtype must be one of float32, float64, got '{}'", model.dtype);
}

std::vector<std::string> model_kinds() { return names_of(model_factories()); }
std::vector<std::string> data_formats() { return names_of(batch_factories()); }

std::shared_ptr<const Model> make_model(const Config& config) {
  return find_named(model_factories(), "model.kind", config.model.kind)(config);
}

std::shared_ptr<const BatchSource> make_batch_source(const Config& config, const std::string& data_root) {
  return find_named(batch_factories(), "data.format", config.data.format)(config, data_root);
}

}  // namespace pipetrain
