#pragma once
// What the CUDA graph runners share (step_runner.cpp for the one process, pass_graphs.cpp for
// pipeline workers): the stream they capture on and how a failed capture is undone.
#include <string>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDAStream.h>

namespace pipetrain::device {

// A stream of the pool, once the device is idle (the model's placement ran on the default
// stream, which a capture may not use).
c10::cuda::CUDAStream idle_capture_stream(const c10::Device& device);

// After `graph`'s capture into `pool` failed: ends the capture, gives the pool's memory back and
// clears CUDA's error, so the run can go on eagerly.
void abandon_capture(at::cuda::CUDAGraph& graph, const c10::Device& device,
                     at::cuda::MempoolId_t pool);

// An exception's first line, for the one line that says the run goes on without graphs.
std::string first_line(const std::string& text);

}  // namespace pipetrain::device
