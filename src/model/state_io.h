#pragma once
// Named tensors <-> safetensors entries (io/safetensors.h stays free of libtorch).
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "io/safetensors.h"

namespace pipetrain {

TensorEntry to_entry(const std::string& name, const torch::Tensor& tensor);
torch::Tensor from_entry(const TensorEntry& entry);

std::vector<TensorEntry> module_entries(torch::nn::Module& module, const std::string& prefix = "");

// Copies every parameter of `module` from `entries` (by name, after `prefix`); UserError naming
// the first missing tensor or shape mismatch, so a wrong-model checkpoint is refused cleanly.
void load_module_entries(torch::nn::Module& module, const std::vector<TensorEntry>& entries,
                         const std::string& origin, const std::string& prefix = "");

}  // namespace pipetrain
