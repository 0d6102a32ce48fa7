#include "model/parameter_role.h"

#include <stdexcept>

namespace pipetrain {
namespace {

bool role_name_ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ParameterRole parameter_role(const std::string& name) {
  const auto dot = name.find('.');
  if (name.rfind("layer", 0) != 0 || dot == std::string::npos) {
    throw std::invalid_argument("not a GPT parameter name: '" + name + "'");
  }
  const std::string rest = name.substr(dot + 1);
  if (rest == "token_weight" || rest == "position_weight") return ParameterRole::Embedding;
  if (rest == "tied_weight") return ParameterRole::Head;
  if (role_name_ends_with(rest, ".bias")) return ParameterRole::Bias;
  if (rest == "ln1.weight" || rest == "ln2.weight" || rest == "ln_f.weight") return ParameterRole::Gain;
  if (rest == "qkv.weight" || rest == "attn_out.weight" || rest == "fc.weight" ||
      rest == "fc_out.weight") {
    return ParameterRole::Hidden;
  }
  throw std::invalid_argument("not a GPT parameter name: '" + name + "'");
}

}  // namespace pipetrain
