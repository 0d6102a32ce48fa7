#pragma once
// Models by name: model.kind picks one of them (default "gpt").
#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "model/model.h"

namespace pipetrain {

// model.dtype as a tensor type: the dtype of the weights and of every float tensor derived from
// them (activations, gradients and the buffers that receive them, optimizer state).
torch::ScalarType compute_dtype(const ModelConfig& model);

std::vector<std::string> model_kinds();
// The model config.model.kind names, its weights seeded by train.seed. UserError naming the
// known kinds for an unknown one.
std::shared_ptr<const Model> make_model(const Config& config);

}  // namespace pipetrain
