#include "core/model_presets.h"

namespace pipetrain {

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      {"gpt2-small", 12, 768, 12, 1024, 50257, "GPT-2 124M (Radford et al. 2019)"},
      {"gpt2-medium", 24, 1024, 16, 1024, 50257, "GPT-2 350M"},
      {"gpt2-large", 36, 1280, 20, 1024, 50257, "GPT-2 774M"},
      {"gpt2-xl", 48, 1600, 25, 1024, 50257, "GPT-2 1.5B"},
      // Llama 3 (Grattafiori et al. 2024, and the published config.json files), trained at
      // context 8192: grouped-query attention with 8 key/value heads, rotary base 500000.
      {"llama3-8b", 32, 4096, 32, 8192, 128256, "Llama 3 8B", "llama", 8, 14336, 500000},
      {"llama3-70b", 80, 8192, 64, 8192, 128256, "Llama 3 70B", "llama", 8, 28672, 500000},
      {"llama3.2-1b", 16, 2048, 32, 8192, 128256, "Llama 3.2 1B (tied head, llama3 rotary scaling)",
       "llama", 8, 8192, 500000, "llama3:32,1,4,8192", "tied"},
      // Small enough to train here on bytes (the default data): 4 blocks of width 128.
      {"llama-bytes", 4, 128, 4, 128, 256, "a small Llama for byte-level text", "llama", 2, 384, 10000},
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
