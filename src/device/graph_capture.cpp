#include "device/graph_capture.h"

#include <exception>

#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

namespace pipetrain::device {

c10::cuda::CUDAStream idle_capture_stream(const c10::Device& device) {
  c10::cuda::device_synchronize();
  return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
}

void abandon_capture(at::cuda::CUDAGraph& graph, const c10::Device& device,
                     at::cuda::MempoolId_t pool) {
  try {
    graph.capture_end();
  } catch (const std::exception&) {}
  c10::cuda::CUDACachingAllocator::endAllocateToPool(device.index(), pool);
  at::getHostAllocator(at::kCUDA)->end_allocate_to_pool(pool);
  c10::cuda::CUDACachingAllocator::releasePool(device.index(), pool);
  at::getHostAllocator(at::kCUDA)->release_pool(pool);
  (void)cudaGetLastError();
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace pipetrain::device
