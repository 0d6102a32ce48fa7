#include "model/registry.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "data/dataset.h"
#include "model/cnn_model.h"
#include "model/gpt_model.h"
#include "model/image_batch.h"
#include "model/speech_batch.h"
#include "model/tensor_file_batch.h"
#include "model/token_batch.h"
#include "model/torchscript_model.h"
#include "model/transducer_model.h"

namespace pipetrain {
namespace {

template <typename Factory>
using Named = std::vector<std::pair<std::string, Factory>>;

std::shared_ptr<const BatchSource> token_windows(const Config& config, const std::string& data_root) {
  return std::make_shared<TokenBatchSource>(make_dataset(config, data_root),
                                            resolve_existing_path(config.data.path, data_root));
}

// (A data.path found nowhere is left to the reader, whose message says how to make or install it.)
std::shared_ptr<const BatchSource> fashion_mnist(const Config& config, const std::string& data_root) {
  return make_fashion_mnist_source(path_or_below_root(config.data.path, data_root),
                                   compute_dtype(config.model));
}

std::shared_ptr<const BatchSource> speech_features(const Config& config, const std::string& data_root) {
  const std::map<std::string, speech::SpeechSplit> splits = {
      {"validation", speech::SpeechSplit::validation}, {"test", speech::SpeechSplit::test},
      {"unseen-voice", speech::SpeechSplit::unseen_voice}};
  return std::make_shared<SpeechBatchSource>(
      path_or_below_root(config.data.path, data_root),
      SpeechBatchShape{config.model.seq_len, config.model.max_labels}, splits.at(config.data.val_split),
      compute_dtype(config.model));
}

// GPT-2 and Llama: one stack (model/gpt.h), from the seed or model.init_from's checkpoint.
std::shared_ptr<const Model> decoder(const Config& config) {
  return std::make_shared<GptModel>(gpt_config_from(config.model), uint64_t(config.train.seed), config.model);
}

Named<ModelFactory>& model_factories() {
  static Named<ModelFactory> factories = {
      {"gpt", decoder},
      {"llama", decoder},
      {"cnn",
       [](const Config& config) {
         return std::make_shared<CnnModel>(cnn_config_from(config.model), uint64_t(config.train.seed));
       }},
      {"torchscript", make_torchscript_model},
      {"transducer",
       [](const Config& config) {
         return std::make_shared<TransducerModel>(transducer_config_from(config.model),
                                                  uint64_t(config.train.seed));
       }},
  };
  return factories;
}

Named<BatchSourceFactory>& batch_factories() {
  static Named<BatchSourceFactory> factories = {{"bytes", token_windows},
                                                {"tokens", token_windows},
                                                {"fashion-mnist", fashion_mnist},
                                                {"safetensors", make_tensor_file_batches},
                                                {"speech", speech_features}};
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

std::string spec_text(const torch::Tensor& tensor) {
  std::vector<std::string> dims;
  for (const int64_t d : tensor.sizes()) dims.push_back(std::to_string(d));
  return fmt::format("{} [{}]", c10::toString(tensor.scalar_type()), join(dims, ", "));
}

std::string spec_text(const TensorSpec& spec) {
  std::vector<std::string> dims;
  for (const int64_t d : spec.shape) dims.push_back(std::to_string(d));
  return fmt::format("{} [{}]", c10::toString(spec.dtype), join(dims, ", "));
}

bool fits(const torch::Tensor& tensor, const TensorSpec& spec) {
  return tensor.scalar_type() == spec.dtype && tensor.sizes().vec() == spec.shape;
}

// A one-row batch of each split against what the model takes: a data format made for another
// kind of model is one line naming both, not a shape error deep inside the first layer; and a
// training split shaped unlike the validation split (images of another size) is caught here,
// not by Gloo aborting a pipeline (or a single process training on it silently).
void check_batches_fit(const Model& model, const BatchSource& source, const Config& config) {
  const std::pair<const char*, Microbatch> splits[] = {
      {"validation", source.val_batch(0, 1)},
      {"training", source.train_batch(uint64_t(config.train.seed), 0, 1)}};
  for (const auto& [split, batch] : splits) {
    const std::pair<const char*, std::pair<torch::Tensor, TensorSpec>> parts[] = {
        {"inputs", {batch.inputs, model.input_spec(1)}}, {"labels", {batch.labels, model.label_spec(1)}}};
    for (const auto& [what, pair] : parts) {
      if (fits(pair.first, pair.second)) continue;
      fail("data.format '{}' brings {} {} {} for one row, but model.kind '{}' takes {}",
           config.data.format, split, what, spec_text(pair.first), config.model.kind,
           spec_text(pair.second));
    }
  }
}

}  // namespace

void register_model_kind(const std::string& name, ModelFactory factory) {
  add_named(model_factories(), "model kind", name, std::move(factory));
}

void register_data_format(const std::string& name, BatchSourceFactory factory) {
  add_named(batch_factories(), "data format", name, std::move(factory));
}

device::Precision model_precision(const ModelConfig& model) {
  return device::precision_of(device::precision_named(model.dtype));
}

torch::ScalarType compute_dtype(const ModelConfig& model) {
  return model_precision(model).parameter_dtype();
}

void require_full_precision(const ModelConfig& model, const std::string& why) {
  if (!model_precision(model).mixed()) return;
  fail("model.dtype = \"{}\" is not supported for model.kind \"{}\" yet ({}); use float32 or "
       "float64", model.dtype, model.kind, why);
}

std::vector<std::string> model_kinds() { return names_of(model_factories()); }
std::vector<std::string> data_formats() { return names_of(batch_factories()); }

void require_data_format(const std::string& format) { find_named(batch_factories(), "data.format", format); }

std::shared_ptr<const Model> make_model(const Config& config) {
  return find_named(model_factories(), "model.kind", config.model.kind)(config);
}

std::shared_ptr<const BatchSource> make_batch_source(const Config& config, const std::string& data_root) {
  const auto& read = find_named(batch_factories(), "data.format", config.data.format);
  const auto model = make_model(config);
  const std::vector<std::string> formats = model->data_formats();
  if (!formats.empty() && std::find(formats.begin(), formats.end(), config.data.format) == formats.end()) {
    fail("data.format '{}' is not data for model.kind '{}', which trains on {}", config.data.format,
         config.model.kind, join(formats, ", "));
  }
  auto source = read(config, data_root);
  check_batches_fit(*model, *source, config);
  return source;
}

}  // namespace pipetrain
