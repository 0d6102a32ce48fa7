#pragma once
// c10d's NCCL backend, in a file of its own: only comm_nccl.cpp is compiled with USE_C10D_NCCL
// and NCCL's header (the wheel's, the NCCL libtorch_cuda runs).
#include <chrono>

#include <c10/core/Device.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace pipetrain::runtime {

// An NCCL process group of `size` ranks over `store`, this rank on `device` (its own GPU: NCCL
// refuses two ranks on one GPU, which device/execution.cpp never asks of it).
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout,
                                                    const c10::Device& device);

}  // namespace pipetrain::runtime
