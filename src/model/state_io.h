#pragma once
// Named tensors <-> safetensors entries (io/safetensors.h stays free of libtorch).
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "io/safetensors.h"

namespace pipetrain {

std::string safetensors_dtype(torch::ScalarType type);  // "F32", ...; UserError for others
TensorEntry to_entry(const std::string& name, const torch::Tensor& tensor);
torch::Tensor from_entry(const TensorEntry& entry);
// from_entry for a tensor that must match `like` (a parameter, or its optimizer state): a
// different shape or dtype is a UserError naming `origin` and the tensor. Another dtype is
// refused, not converted: float32 values rounded into a float64 run (or the reverse) would not
// continue the same training, so a checkpoint resumes in its own model.dtype.
torch::Tensor from_entry_like(const TensorEntry& entry, const torch::Tensor& like,
                              const std::string& origin);

// The module's parameters, then its buffers (BatchNorm's running statistics): a checkpoint
// resumes them too. module_tensors names them without copying their data.
std::vector<std::pair<std::string, torch::Tensor>> module_tensors(torch::nn::Module& module,
                                                                  const std::string& prefix = "");
std::vector<TensorEntry> module_entries(torch::nn::Module& module, const std::string& prefix = "");

// Copies every parameter and buffer of `module` from `entries` (by name, after `prefix`); UserError naming
// the first missing tensor or shape mismatch, so a wrong-model checkpoint is refused cleanly.
void load_module_entries(torch::nn::Module& module, const std::vector<TensorEntry>& entries,
                         const std::string& origin, const std::string& prefix = "");

}  // namespace pipetrain
