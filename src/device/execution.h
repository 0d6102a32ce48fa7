#pragma once
// Where and how a run computes: its device, the transport between its workers and its
// precision, decided once (decide_execution) from the config and the hardware, then carried by
// the run spec to every worker. Nothing else in pipetrain looks at train.device or asks how many
// GPUs there are; stage code reads this value (or the tensors' own devices), never branches on
// `cuda` itself. No libtorch in this header: the run spec includes it.
#include <cstdint>
#include <string>

namespace pipetrain::device {

enum class DeviceKind { Cpu, Cuda };

// How tensors travel between worker processes.
enum class Transport {
  Gloo,           // c10d Gloo over TCP, host tensors (CPU workers)
  GlooHostStaged, // Gloo, each GPU tensor copied to pinned host memory around send/recv: GPUs
                  // shared by several workers (NCCL refuses two ranks on one GPU)
  Nccl,           // c10d NCCL, device tensors: every worker of a node has its own GPU
};

// What model.dtype means. Mixed precision: weights, gradients, their accumulation and
// reductions, optimizer state and the loss in float32; matrix products, convolutions and
// attention in the low precision (autocast); what crosses a layer boundary, and so what workers
// send, in the low precision (half the bytes). Float16 mixed adds dynamic loss scaling
// (train/loss_scale.h): float16's range is too narrow for small gradients.
enum class PrecisionKind { Float32, Float64, BFloat16Mixed, Float16Mixed };

// train.cuda_graphs: how a step's kernels are launched.
enum class Graphs {
  Off,       // every kernel from the host
  Captured,  // captured once as CUDA graphs and replayed: the one process's whole step
             // (device/step_runner.h), a pipeline worker's forward and backward of a microbatch
             // (device/pass_graphs.h)
  Emulated,  // a pipeline worker's graph bookkeeping (slots, the static inputs they copy into,
             // the copies out) run eagerly, on any device: checks without a GPU
};

struct Execution {
  DeviceKind device = DeviceKind::Cpu;
  int gpus = 0;             // GPUs this node's workers share out (cuda), 0 on cpu
  int workers_per_node = 1; // worker processes on one node
  Transport transport = Transport::Gloo;
  PrecisionKind precision = PrecisionKind::Float32;
  Graphs graphs = Graphs::Off;  // train.cuda_graphs
};

// The hardware a decision reads: passed in, so the decision is a pure function (tests give
// it GPUs this machine lacks).
struct Hardware {
  int gpus = 0;  // CUDA devices this process sees
};

// train.device ("cpu", "cuda", "auto": cuda when a GPU is seen) and model.dtype ("float32",
// "float64", "bfloat16", "float16") for `workers_per_node` worker processes per node. UserError (one line)
// for "cuda" without a GPU or an unknown name.
Execution decide_execution(const std::string& train_device, const std::string& model_dtype,
                           int workers_per_node, const Hardware& hardware);

// `execution` with train.cuda_graphs decided: 0 off, 1 captured (UserError, one line, unless
// the run computes on a GPU: capture needs a CUDA stream), 2 emulated. What a pipeline's
// schedule must allow is the runtime's to say (runtime/run_spec.cpp).
Execution with_cuda_graphs(Execution execution, int64_t cuda_graphs);

// model.dtype as a precision kind; UserError naming the known ones.
PrecisionKind precision_named(const std::string& model_dtype);

// The GPU a worker uses (its node-local rank `local_rank`): workers take GPUs round-robin, so
// with as many GPUs as workers each has its own. -1 on cpu.
int gpu_of(const Execution& execution, int local_rank);

const char* name_of(Transport transport);      // "gloo", "gloo (host-staged)", "nccl"
const char* name_of(PrecisionKind precision);  // "float32", "float64", "bfloat16 mixed", ...
// "cuda: 2 workers sharing 1 GPU, gloo (host-staged), bfloat16 mixed" / "cpu, gloo, float32" /
// "cuda: 1 GPU, bfloat16 mixed, CUDA graphs"
std::string describe(const Execution& execution);

// Whether a cuda run's workers of a node outnumber its GPUs, so that some share one.
bool shares_gpus(const Execution& execution);

// One note line when workers share GPUs (why such a run is slow and what is faster), else "".
std::string sharing_advice(const Execution& execution);

}  // namespace pipetrain::device
