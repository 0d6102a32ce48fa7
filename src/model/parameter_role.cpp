#include "model/parameter_role.h"

#include <cctype>
#include <set>
#include <stdexcept>

namespace pipetrain {
namespace {

bool role_name_ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// i from "layer<i>.<rest>", or -1.
int64_t layer_index_of(const std::string& name) {
  const std::string prefix = "layer";
  const auto dot = name.find('.');
  if (name.rfind(prefix, 0) != 0 || dot == std::string::npos || dot == prefix.size()) return -1;
  int64_t index = 0;
  for (size_t i = prefix.size(); i < dot; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) return -1;
    index = index * 10 + (name[i] - '0');
  }
  return index;
}

}  // namespace

ParameterRole parameter_role(const std::string& name) {
  const auto dot = name.find('.');
  if (name.rfind("layer", 0) != 0 || dot == std::string::npos) {
    throw std::invalid_argument("not a GPT parameter name: '" + name + "'");
  }
  const std::string rest = name.substr(dot + 1);
  if (rest == "token_weight" || rest == "position_weight") return ParameterRole::Embedding;
  if (rest == "tied_weight" || rest == "head_weight") return ParameterRole::Head;
  if (role_name_ends_with(rest, ".bias")) return ParameterRole::Bias;
  static const std::set<std::string> gains = {"ln1.weight", "ln2.weight", "ln_f.weight",
                                               "attn_norm.weight", "mlp_norm.weight", "norm.weight"};
  static const std::set<std::string> hidden = {"qkv.weight", "attn_out.weight", "fc.weight",
                                                "fc_out.weight", "q.weight", "k.weight", "v.weight",
                                                "o.weight", "gate.weight", "up.weight", "down.weight"};
  if (gains.count(rest) != 0) return ParameterRole::Gain;
  if (hidden.count(rest) != 0) return ParameterRole::Hidden;
  throw std::invalid_argument("not a GPT parameter name: '" + name + "'");
}

ParameterRole default_parameter_role(const std::string& name, const std::vector<int64_t>& shape,
                                     int64_t layer_count) {
  for (const char* buffer : {".running_mean", ".running_var", ".num_batches_tracked"}) {
    if (role_name_ends_with(name, buffer)) return ParameterRole::State;
  }
  if (shape.size() < 2) {
    return role_name_ends_with(name, "bias") ? ParameterRole::Bias : ParameterRole::Gain;
  }
  const int64_t layer = layer_index_of(name);
  if (layer == 0) return ParameterRole::Embedding;
  if (layer == layer_count - 1) return ParameterRole::Head;
  return ParameterRole::Hidden;
}

}  // namespace pipetrain
