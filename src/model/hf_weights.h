#pragma once
// A decoder's weights from and to a Hugging Face checkpoint (model.init_from; `pipetrain export
// --format hf`), through hf/hf_names.h's map: GPT-2's Conv1D weights transposed, any stored
// dtype converted to the model's.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "io/safetensors.h"

namespace pipetrain {

// Copies model.init_from's tensors into the parameters of `stage`, which holds layers
// [first, last): only those layers' tensors are read, each from its own shard. UserError naming
// the tensor and both shapes when one does not fit the model model.* describes.
void load_hf_weights(torch::nn::Module& stage, const ModelConfig& model, int64_t first, int64_t last);

// The whole model `whole` as a Hugging Face checkpoint's tensors, in `dtype`.
std::vector<TensorEntry> hf_entries(torch::nn::Module& whole, const ModelConfig& model,
                                    torch::ScalarType dtype);

}  // namespace pipetrain
