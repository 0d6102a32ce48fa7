#include "model/registry.h"

#include <functional>
#include <utility>

#include "core/error.h"
#include "core/text.h"
#include "model/gpt_model.h"

namespace pipetrain {
namespace {

using ModelFactory = std::function<std::shared_ptr<const Model>(const Config&)>;

const std::vector<std::pair<std::string, ModelFactory>>& registry() {
  static const std::vector<std::pair<std::string, ModelFactory>> models = {
      {"gpt",
       [](const Config& config) {
         return std::make_shared<GptModel>(gpt_config_from(config.model), uint64_t(config.train.seed));
       }},
  };
  return models;
}

}  // namespace

torch::ScalarType compute_dtype(const ModelConfig& model) {
  if (model.dtype == "float32") return torch::kFloat32;
  if (model.dtype == "float64") return torch::kFloat64;
  fail("model.dtype must be one of float32, float64, got '{}'", model.dtype);
}

std::vector<std::string> model_kinds() {
  std::vector<std::string> kinds;
  for (const auto& entry : registry()) kinds.push_back(entry.first);
  return kinds;
}

std::shared_ptr<const Model> make_model(const Config& config) {
  for (const auto& [kind, factory] : registry()) {
    if (kind == config.model.kind) return factory(config);
  }
  fail("model.kind must be one of {}, got '{}'", join(model_kinds(), ", "), config.model.kind);
}

}  // namespace pipetrain
