#pragma once
// What each GPT parameter is, from its name ("layer<i>.<rest>", as GptStack registers them):
// the one place an optimizer that treats parameters differently (Muon for hidden matrices,
// AdamW for the rest) learns which is which. Free of libtorch.
#include <string>

namespace pipetrain {

enum class ParameterRole {
  Hidden,     // a transformer block's 2-D weight matrix (qkv, attn_out, fc, fc_out)
  Embedding,  // token and position embeddings
  Head,       // the last stage's copy of the tied token weight
  Gain,       // a layer norm's weight
  Bias,
};

// std::invalid_argument for a name the GPT does not register.
ParameterRole parameter_role(const std::string& name);

}  // namespace pipetrain
