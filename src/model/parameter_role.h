#pragma once
// What an optimizer may treat differently (Muon orthogonalises the hidden weight matrices, AdamW
// the rest). Each model answers for its parameters (Model::role_of); the optimizer and the
// checkpoint check receive the answer as a ParameterRoles lookup and never see a name's meaning.
// Here: GPT's rule by name ("layer<i>.<rest>", as GptStack registers them) and the default rule
// by shape for models that do not say. Free of libtorch.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace pipetrain {

enum class ParameterRole {
  Hidden,     // a weight matrix inside the network (a convolution kernel: [out, -1] for Muon)
  Embedding,  // the input's embedding or projection (GPT's token and position embeddings)
  Head,       // the output layer (GPT's last-stage copy of the tied token weight, a classifier)
  Gain,       // a normalisation's weight
  Bias,
  State,      // not a parameter: a buffer the model updates itself (BatchNorm's running
              // statistics), checkpointed beside the weights, with no optimizer state
};

// A parameter's role from its name and shape: a model's answer, bound (Model's roles_of).
using ParameterRoles =
    std::function<ParameterRole(const std::string& name, const std::vector<int64_t>& shape)>;

// GPT's rule; std::invalid_argument for a name the GPT does not register.
ParameterRole parameter_role(const std::string& name);

// The rule for a model of `layer_count` layers that does not give its own: a tensor of 2 or more
// dimensions is Hidden, except in the first layer ("layer0.": Embedding) and the last (Head);
// a smaller one is a Bias if its name ends in "bias", else a Gain. A name without the
// "layer<i>." prefix counts as inside the network. The buffers of torch's BatchNorm
// (running_mean, running_var, num_batches_tracked) are State.
ParameterRole default_parameter_role(const std::string& name, const std::vector<int64_t>& shape,
                                     int64_t layer_count);

}  // namespace pipetrain
