#pragma once
// Named model shapes (`model.preset = "gpt2-small"`, "llama3-8b"): the one list of published
// decoder sizes, read by the config (a preset sets model.kind and the shape fields) and the
// planner (`pipetrain plan --model NAME` for the GPT ones; `plan --config` for any).
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain {

struct ModelPreset {
  std::string name;
  int64_t layers = 0, d_model = 0, heads = 0, seq_len = 0, vocab_size = 0;
  std::string origin;  // where the shape comes from
  std::string kind = "gpt";
  // Llama's (model.kv_heads, ffn_hidden, rope_theta, rope_scaling, head, norm_eps); GPT's are
  // the fields' defaults.
  int64_t kv_heads = 0, ffn_hidden = 0;
  double rope_theta = 10000;
  std::string rope_scaling, head = "auto";
  double norm_eps = 1e-5;
};

const std::vector<ModelPreset>& model_presets();
// nullptr for a name that is no preset.
const ModelPreset* find_model_preset(const std::string& name);
std::vector<std::string> model_preset_names();

}  // namespace pipetrain
