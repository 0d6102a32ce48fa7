#include "device/placement.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <torch/cuda.h>

namespace pipetrain::device {

Hardware this_hardware() { return Hardware{int(torch::cuda::device_count())}; }

Execution decide_execution_here(const std::string& train_device, const std::string& model_dtype,
                                int workers_per_node) {
  return decide_execution(train_device, model_dtype, workers_per_node, this_hardware());
}

c10::Device worker_device(const Execution& execution, int local_rank) {
  if (execution.device == DeviceKind::Cpu) return c10::Device(c10::DeviceType::CPU);
  return c10::Device(c10::DeviceType::CUDA, c10::DeviceIndex(gpu_of(execution, local_rank)));
}

at::Tensor to_device(const at::Tensor& tensor, const c10::Device& device) {
  if (!tensor.defined() || tensor.device() == device) return tensor;
  if (device.is_cuda() && tensor.is_cpu()) {
    return tensor.pin_memory().to(device, /*non_blocking=*/true);
  }
  return tensor.to(device);
}

at::Tensor to_host(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.is_cpu()) return tensor;
  return tensor.to(c10::Device(c10::DeviceType::CPU));
}

void synchronize(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

std::optional<DeviceMemory> device_memory(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  return DeviceMemory{stats.allocated_bytes[all].current, stats.allocated_bytes[all].peak,
                      stats.reserved_bytes[all].current};
}

int64_t gpu_memory_bytes(int index) {
  return int64_t(at::cuda::getDeviceProperties(c10::DeviceIndex(index))->totalGlobalMem);
}

void reset_peak_memory(const c10::Device& device) {
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

}  // namespace pipetrain::device
