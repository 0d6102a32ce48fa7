#include "device/execution.h"

#include <fmt/format.h>

#include "core/error.h"

namespace pipetrain::device {
namespace {

DeviceKind device_kind(const std::string& train_device, const Hardware& hardware) {
  if (train_device == "cpu") return DeviceKind::Cpu;
  if (train_device == "auto") return hardware.gpus > 0 ? DeviceKind::Cuda : DeviceKind::Cpu;
  if (train_device == "cuda") {
    if (hardware.gpus == 0) {
      fail("train.device = \"cuda\" but no GPU is usable here (libtorch sees 0 CUDA devices); "
           "use \"cpu\" or \"auto\"");
    }
    return DeviceKind::Cuda;
  }
  fail("train.device must be cpu, cuda or auto, got '{}'", train_device);
}

}  // namespace

PrecisionKind precision_named(const std::string& model_dtype) {
  if (model_dtype == "float32") return PrecisionKind::Float32;
  if (model_dtype == "float64") return PrecisionKind::Float64;
  if (model_dtype == "bfloat16") return PrecisionKind::BFloat16Mixed;
  if (model_dtype == "float16") return PrecisionKind::Float16Mixed;
  fail("model.dtype must be one of float32, float64, bfloat16, float16, got '{}'", model_dtype);
}

Execution decide_execution(const std::string& train_device, const std::string& model_dtype,
                           int workers_per_node, const Hardware& hardware) {
  Execution execution;
  execution.device = device_kind(train_device, hardware);
  execution.precision = precision_named(model_dtype);
  execution.workers_per_node = workers_per_node;
  if (execution.device == DeviceKind::Cpu) return execution;
  execution.gpus = hardware.gpus;
  // NCCL needs a GPU per rank ("Duplicate GPU detected" otherwise); one worker needs no transport.
  execution.transport = !shares_gpus(execution) && workers_per_node > 1 ? Transport::Nccl
                                                                        : Transport::GlooHostStaged;
  return execution;
}

Execution with_cuda_graphs(Execution execution, int64_t cuda_graphs) {
  if (cuda_graphs == 0) return execution;
  if (cuda_graphs == 2) {
    execution.graphs = Graphs::Emulated;
    return execution;
  }
  if (execution.device != DeviceKind::Cuda) {
    fail("train.cuda_graphs = 1 replays steps on a GPU, but this run computes on the CPU "
         "(train.device); use train.cuda_graphs = 0 (or 2: the graphs' bookkeeping, run eagerly)");
  }
  execution.graphs = Graphs::Captured;
  return execution;
}

int gpu_of(const Execution& execution, int local_rank) {
  if (execution.device == DeviceKind::Cpu) return -1;
  return local_rank % execution.gpus;
}

const char* name_of(Transport transport) {
  switch (transport) {
    case Transport::Gloo: return "gloo";
    case Transport::GlooHostStaged: return "gloo (host-staged)";
    case Transport::Nccl: return "nccl";
  }
  return "?";
}

const char* name_of(PrecisionKind precision) {
  switch (precision) {
    case PrecisionKind::Float32: return "float32";
    case PrecisionKind::Float64: return "float64";
    case PrecisionKind::BFloat16Mixed: return "bfloat16 mixed";
    case PrecisionKind::Float16Mixed: return "float16 mixed, loss scaled";
  }
  return "?";
}

std::string describe(const Execution& execution) {
  const std::string transport = execution.workers_per_node > 1
                                    ? fmt::format(", {}", name_of(execution.transport))
                                    : std::string();
  const char* emulated = execution.graphs == Graphs::Emulated ? ", CUDA graphs emulated" : "";
  if (execution.device == DeviceKind::Cpu) {
    return fmt::format("cpu{}, {}{}", transport, name_of(execution.precision), emulated);
  }
  const int w = execution.workers_per_node, g = execution.gpus;
  const std::string gpus =
      w == 1 ? "1 GPU"
      : !shares_gpus(execution) ? fmt::format("{} workers, a GPU each", w)
               : fmt::format("{} workers sharing {} GPU{}", w, g, g == 1 ? "" : "s");
  return fmt::format("cuda: {}{}, {}{}{}", gpus, transport, name_of(execution.precision),
                     execution.graphs == Graphs::Captured ? ", CUDA graphs" : "", emulated);
}

bool shares_gpus(const Execution& execution) {
  return execution.device == DeviceKind::Cuda && execution.workers_per_node > execution.gpus;
}

std::string sharing_advice(const Execution& execution) {
  if (!shares_gpus(execution)) return "";
  const int w = execution.workers_per_node, g = execution.gpus;
  // Measured on an H200 (docs/benchmarks.md, "GPU check"): GPT-2 small, 2 workers on one GPU.
  return fmt::format(
      "pipetrain: note: {} workers share {} GPU{}: their kernels take turns on it and every "
      "tensor between stages goes through host memory (NCCL wants a GPU per worker), so this "
      "runs several times slower than one process (2.7-6.3x for GPT-2 small on an H200). It "
      "checks a pipeline on a small machine; with one GPU, --stages 1 trains faster",
      w, g, g == 1 ? "" : "s");
}

}  // namespace pipetrain::device
