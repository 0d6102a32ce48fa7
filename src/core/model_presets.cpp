#include "core/model_presets.h"

#include <utility>

namespace pipetrain {

namespace {

// GPT-2's shapes: context 1024, its 50257-token vocabulary.
ModelPreset gpt2(std::string name, int64_t layers, int64_t d_model, int64_t heads, std::string origin) {
  ModelPreset preset;
  preset.name = std::move(name), preset.origin = std::move(origin);
  preset.layers = layers, preset.d_model = d_model, preset.heads = heads;
  preset.seq_len = 1024, preset.vocab_size = 50257;
  return preset;
}

ModelPreset llama(std::string name, int64_t layers, int64_t d_model, int64_t heads, int64_t seq_len,
                  int64_t vocab_size, std::string origin, int64_t kv_heads, int64_t ffn_hidden,
                  double rope_theta, std::string rope_scaling = "", std::string head = "auto") {
  ModelPreset preset;
  preset.name = std::move(name), preset.origin = std::move(origin), preset.kind = "llama";
  preset.layers = layers, preset.d_model = d_model, preset.heads = heads;
  preset.seq_len = seq_len, preset.vocab_size = vocab_size;
  preset.kv_heads = kv_heads, preset.ffn_hidden = ffn_hidden, preset.rope_theta = rope_theta;
  preset.rope_scaling = std::move(rope_scaling), preset.head = std::move(head);
  return preset;
}

}  // namespace

const std::vector<ModelPreset>& model_presets() {
  static const std::vector<ModelPreset> presets = {
      gpt2("gpt2-small", 12, 768, 12, "GPT-2 124M (Radford et al. 2019)"),
      gpt2("gpt2-medium", 24, 1024, 16, "GPT-2 350M"),
      gpt2("gpt2-large", 36, 1280, 20, "GPT-2 774M"),
      gpt2("gpt2-xl", 48, 1600, 25, "GPT-2 1.5B"),
      // Llama 3 (Grattafiori et al. 2024, and the published config.json files), trained at
      // context 8192: grouped-query attention with 8 key/value heads, rotary base 500000.
      llama("llama3-8b", 32, 4096, 32, 8192, 128256, "Llama 3 8B", 8, 14336, 500000),
      llama("llama3-70b", 80, 8192, 64, 8192, 128256, "Llama 3 70B", 8, 28672, 500000),
      llama("llama3.2-1b", 16, 2048, 32, 8192, 128256, "Llama 3.2 1B (tied head, llama3 rotary scaling)",
            8, 8192, 500000, "llama3:32,1,4,8192", "tied"),
      // Small enough to train here on bytes (the default data): 4 blocks of width 128.
      llama("llama-bytes", 4, 128, 4, 128, 256, "a small Llama for byte-level text", 2, 384, 10000),
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
