#pragma once
// pipetrain's parameter names <-> a Hugging Face checkpoint's, layer by layer, for GPT-2
// (GPT2LMHeadModel: its Conv1D weights are stored [in, out], transposed from pipetrain's
// [out, in]) and Llama (LlamaForCausalLM). Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace pipetrain::hf {

struct TensorName {
  std::string pipetrain;  // "layer3.qkv.weight"
  std::string hf;         // "transformer.h.2.attn.c_attn.weight"
  bool transposed = false;  // stored as the transpose of pipetrain's tensor
};

// The tensors of pipetrain layer `layer` (0 = embedding, 1 .. layers = blocks, layers + 1 =
// head). The head lists its weight under both of its pipetrain names when tied ("tied_weight",
// a stage's own copy of the embedding's) or "head_weight" when untied. `gpt2_prefix` is where a
// GPT-2 checkpoint keeps its transformer ("transformer." as GPT2LMHeadModel saves it).
std::vector<TensorName> layer_tensor_names(const ModelConfig& model, int64_t layer,
                                           const std::string& gpt2_prefix = "transformer.");

// Every tensor of the model, once: what an export writes (a tied head's weight is the
// embedding's, written once, as from_pretrained expects).
std::vector<TensorName> model_tensor_names(const ModelConfig& model);

}  // namespace pipetrain::hf
