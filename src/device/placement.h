#pragma once
// Tensors on a worker's device: where it computes, how host batches reach it, and what its
// memory and clock read. The only code that tells a GPU from the CPU (with execution.cpp);
// callers pass a device, never test for one.
#include <cstdint>
#include <optional>
#include <string>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "device/execution.h"

namespace pipetrain::device {

// What this process sees (libtorch's CUDA device count).
Hardware this_hardware();
// decide_execution on this machine's hardware (what libtorch sees): every caller's entry point.
Execution decide_execution_here(const std::string& train_device, const std::string& model_dtype,
                                int workers_per_node);

// The device of the worker with node-local rank `local_rank` (its GPU, or the CPU).
c10::Device worker_device(const Execution& execution, int local_rank);

// `tensor` on `device`: unchanged when already there; a host tensor bound for a GPU goes
// through pinned memory asynchronously (the copy overlaps the compute queued before it).
at::Tensor to_device(const at::Tensor& tensor, const c10::Device& device);
// A device tensor's values on the host (a checkpoint, a host-staged send); host tensors unchanged.
at::Tensor to_host(const at::Tensor& tensor);

// Waits for the work queued on `device` (reading a clock or a loss); nothing on the CPU.
void synchronize(const c10::Device& device);

// The CUDA caching allocator's bytes on a GPU; nullopt on the CPU (whose memory the counting
// allocator of runtime/memory_accounting reads).
struct DeviceMemory {
  int64_t allocated = 0, peak = 0, reserved = 0;
};
std::optional<DeviceMemory> device_memory(const c10::Device& device);
void reset_peak_memory(const c10::Device& device);
// The memory of GPU `index` (its total, as the driver reports it).
int64_t gpu_memory_bytes(int index);

}  // namespace pipetrain::device
