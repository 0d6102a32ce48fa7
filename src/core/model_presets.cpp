#include "core/model_presets.h"

namespace pipetrain {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt2-small", 12, 768, 12, 1024, 50257, "GPT-2 124M (Radford et al. 2019)"},
      {"gpt2-medium", 24, 1024, 16, 1024, 50257, "GPT-2 350M"},
      {"gpt2-large", 36, 1280, 20, 1024, 50257, "GPT-2 774M"},
      {"gpt2-xl", 48, 1600, 25, 1024, 50257, "GPT-2 1.5B"},
  };
  return presets;
}

const ModelPreset* find_model_preset(const std::string& name) {
  for (const auto& preset : model_presets()) {
    if (preset.name == name) return &preset;
  }
  return nullptr;
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& preset : model_presets()) names.push_back(preset.name);
  return names;
}

}  // namespace pipetrain
