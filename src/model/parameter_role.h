#pragma once
// What an optimizer may treat differently (Muon orthogonalises only 2-D hidden weights, AdamW
// the rest), and GPT's rule for it from a parameter's name ("layer<i>.<rest>", as GptStack
// registers them): GptModel::role_of answers with it. Free of libtorch.
// The optimizer still asks parameter_role() by name, so Muon knows GPT's names only (open:
// docs/models.md, "Not yet behind the interface").
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
