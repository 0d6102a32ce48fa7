#include "model/state_io.h"

#include "device/placement.h"

#include <map>

#include "core/error.h"

namespace pipetrain {
namespace {

torch::ScalarType scalar_type(const std::string& dtype) {
  if (dtype == "F32") return torch::kFloat32;
  if (dtype == "F64") return torch::kFloat64;
  if (dtype == "BF16") return torch::kBFloat16;
  if (dtype == "F16") return torch::kFloat16;
  if (dtype == "I64") return torch::kInt64;
  if (dtype == "I32") return torch::kInt32;
  if (dtype == "U8") return torch::kUInt8;
  fail("cannot load tensors of dtype {}", dtype);
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// The model.dtype spelling of a safetensors dtype, where there is one.
std::string dtype_text(const std::string& dtype) {
  if (dtype == "F32") return "float32";
  if (dtype == "F64") return "float64";
  return dtype;
}

}  // namespace

std::string safetensors_dtype(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat32: return "F32";
    case torch::kFloat64: return "F64";
    case torch::kBFloat16: return "BF16";
    case torch::kFloat16: return "F16";
    case torch::kInt64: return "I64";
    case torch::kInt32: return "I32";
    case torch::kUInt8: return "U8";
    default: fail("cannot store tensors of type {}", c10::toString(type));
  }
}

TensorEntry to_entry(const std::string& name, const torch::Tensor& tensor) {
  const auto contiguous = tensor.detach().to(torch::kCPU).contiguous();
  TensorEntry entry;
  entry.name = name;
  entry.dtype = safetensors_dtype(contiguous.scalar_type());
  entry.shape = contiguous.sizes().vec();
  entry.bytes.assign(static_cast<const char*>(contiguous.data_ptr()), contiguous.nbytes());
  return entry;
}

torch::Tensor from_entry(const TensorEntry& entry) {
  auto tensor = torch::empty(entry.shape, torch::dtype(scalar_type(entry.dtype)));
  std::memcpy(tensor.data_ptr(), entry.bytes.data(), entry.bytes.size());
  return tensor;
}

torch::Tensor from_entry_like(const TensorEntry& entry, const torch::Tensor& like,
                              const std::string& origin) {
  if (entry.shape != like.sizes().vec()) {
    fail("{}: tensor '{}' has shape {}, the model needs {}", origin, entry.name,
         shape_text(entry.shape), shape_text(like.sizes().vec()));
  }
  const std::string wanted = safetensors_dtype(like.scalar_type());
  if (entry.dtype != wanted) {
    fail("{}: tensor '{}' is {} but this run's model.dtype is {}: a checkpoint continues in its "
         "own dtype (set model.dtype = \"{}\")", origin, entry.name, dtype_text(entry.dtype),
         dtype_text(wanted), dtype_text(entry.dtype));
  }
  return device::to_device(from_entry(entry), like.device());  // a checkpoint knows no device
}

std::vector<std::pair<std::string, torch::Tensor>> module_tensors(torch::nn::Module& module,
                                                                  const std::string& prefix) {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& item : module.named_parameters()) named.emplace_back(prefix + item.key(), item.value());
  for (const auto& item : module.named_buffers()) named.emplace_back(prefix + item.key(), item.value());
  return named;
}

std::vector<TensorEntry> module_entries(torch::nn::Module& module, const std::string& prefix) {
  std::vector<TensorEntry> entries;
  for (const auto& [name, tensor] : module_tensors(module, prefix)) entries.push_back(to_entry(name, tensor));
  return entries;
}

void load_module_entries(torch::nn::Module& module, const std::vector<TensorEntry>& entries,
                         const std::string& origin, const std::string& prefix) {
  std::map<std::string, const TensorEntry*> by_name;
  for (const auto& entry : entries) by_name[entry.name] = &entry;
  torch::NoGradGuard no_grad;
  const auto load = [&](const std::string& name, torch::Tensor& tensor) {
    const auto it = by_name.find(prefix + name);
    if (it == by_name.end()) fail("{}: has no tensor '{}' (checkpoint of a different model?)", origin, prefix + name);
    tensor.copy_(from_entry_like(*it->second, tensor, origin));
  };
  for (auto& item : module.named_parameters()) load(item.key(), item.value());
  for (auto& item : module.named_buffers()) load(item.key(), item.value());
}

}  // namespace pipetrain
