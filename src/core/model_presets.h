#pragma once
// Named model shapes (`model.preset = "gpt2-small"`): the one list of GPT sizes, read by the
// config (a preset sets the shape fields) and the planner (`pipetrain plan --model NAME`).
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain {

struct ModelPreset {
  std::string name;
  int64_t layers = 0, d_model = 0, heads = 0, seq_len = 0, vocab_size = 0;
  std::string origin;  // where the shape comes from
};

const std::vector<ModelPreset>& model_presets();
// nullptr for a name that is no preset.
const ModelPreset* find_model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace pipetrain
