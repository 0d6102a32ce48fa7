#include "model/hf_weights.h"

#include <map>
#include <string>

#include <fmt/format.h>

#include "core/error.h"
#include "hf/hf_checkpoint.h"
#include "hf/hf_names.h"
#include "model/state_io.h"

namespace pipetrain {
namespace {

std::string shape_of(const std::vector<int64_t>& shape) {
  std::string text;
  for (const int64_t d : shape) text += (text.empty() ? "" : ", ") + std::to_string(d);
  return "[" + text + "]";
}

// Where a GPT-2 checkpoint keeps its transformer: GPT2LMHeadModel saves "transformer.wte...",
// a bare GPT2Model "wte...".
std::string gpt2_prefix(const hf::CheckpointReader& checkpoint) {
  return checkpoint.has("transformer.wte.weight") || !checkpoint.has("wte.weight") ? "transformer." : "";
}

}  // namespace

void load_hf_weights(torch::nn::Module& stage, const ModelConfig& model, int64_t first, int64_t last) {
  const hf::CheckpointReader checkpoint(model.init_from);
  const std::string prefix = gpt2_prefix(checkpoint);
  std::map<std::string, hf::TensorName> by_ours;
  for (int64_t layer = first; layer < last; ++layer) {
    for (auto& name : hf::layer_tensor_names(model, layer, prefix)) by_ours[name.pipetrain] = name;
  }
  std::vector<std::string> wanted;
  std::map<std::string, std::vector<torch::Tensor>> targets;  // hf name -> our parameters
  std::map<std::string, bool> transposed;
  for (const auto& item : stage.named_parameters()) {
    const std::string& name = item.key();
    const torch::Tensor& parameter = item.value();
    const auto found = by_ours.find(name);
    if (found == by_ours.end()) throw std::logic_error("no Hugging Face name for parameter " + name);
    if (targets[found->second.hf].empty()) wanted.push_back(found->second.hf);
    targets[found->second.hf].push_back(parameter);
    transposed[found->second.hf] = found->second.transposed;
  }
  torch::NoGradGuard no_grad;
  for (const auto& entry : checkpoint.read(wanted)) {
    torch::Tensor value = from_entry(entry);
    if (transposed[entry.name]) value = value.t();
    for (auto& parameter : targets[entry.name]) {
      if (value.sizes() != parameter.sizes()) {
        fail("model.init_from: tensor '{}' of '{}' is {}{} but the model needs {}", entry.name,
             model.init_from, shape_of(value.sizes().vec()), transposed[entry.name] ? " transposed" : "",
             shape_of(parameter.sizes().vec()));
      }
      parameter.copy_(value);
    }
  }
}

std::vector<TensorEntry> hf_entries(torch::nn::Module& whole, const ModelConfig& model,
                                    torch::ScalarType dtype) {
  std::map<std::string, torch::Tensor> ours;
  for (const auto& item : whole.named_parameters()) ours[item.key()] = item.value();
  std::vector<TensorEntry> entries;
  for (const auto& name : hf::model_tensor_names(model)) {
    const auto found = ours.find(name.pipetrain);
    if (found == ours.end()) throw std::logic_error("the model has no parameter " + name.pipetrain);
    torch::Tensor value = found->second.detach().to(dtype);
    if (name.transposed) value = value.t();
    entries.push_back(to_entry(name.hf, value));
  }
  return entries;
}

}  // namespace pipetrain
