// The one decision of device, transport and precision (device/execution.h): a pure function of
// train.device, model.dtype, workers per node and the GPUs seen, so every branch is tested here
// without a GPU.
#include <gtest/gtest.h>

#include "core/error.h"
#include "device/execution.h"

namespace pipetrain::device {
namespace {

TEST(Execution, CpuRunsGlooAndTheNamedPrecision) {
  const Execution e = decide_execution("cpu", "float64", 4, Hardware{8});
  EXPECT_EQ(e.device, DeviceKind::Cpu);
  EXPECT_EQ(e.transport, Transport::Gloo);
  EXPECT_EQ(e.precision, PrecisionKind::Float64);
  EXPECT_EQ(gpu_of(e, 3), -1);
  EXPECT_EQ(describe(e), "cpu, gloo, float64");
}

TEST(Execution, AutoTakesTheGpuOnlyWhenOneIsSeen) {
  EXPECT_EQ(decide_execution("auto", "float32", 1, Hardware{0}).device, DeviceKind::Cpu);
  EXPECT_EQ(decide_execution("auto", "float32", 1, Hardware{1}).device, DeviceKind::Cuda);
  EXPECT_EQ(describe(decide_execution("auto", "bfloat16", 1, Hardware{1})), "cuda: 1 GPU, bfloat16 mixed");
}

TEST(Execution, NcclOnlyWhenEveryWorkerOfANodeHasItsOwnGpu) {
  const Execution own = decide_execution("cuda", "bfloat16", 4, Hardware{8});
  EXPECT_EQ(own.transport, Transport::Nccl);
  EXPECT_EQ(describe(own), "cuda: 4 workers, a GPU each, nccl, bfloat16 mixed");
  EXPECT_EQ(decide_execution("cuda", "float32", 8, Hardware{8}).transport, Transport::Nccl);
  // NCCL refuses two ranks on one GPU: shared GPUs stage sends through the host over Gloo.
  const Execution shared = decide_execution("cuda", "float64", 3, Hardware{1});
  EXPECT_EQ(shared.transport, Transport::GlooHostStaged);
  EXPECT_EQ(describe(shared), "cuda: 3 workers sharing 1 GPU, gloo (host-staged), float64");
  EXPECT_EQ(decide_execution("cuda", "float32", 9, Hardware{8}).transport, Transport::GlooHostStaged);
}

TEST(Execution, SharedGpusGetANoteAndOwnGpusNone) {
  EXPECT_EQ(sharing_advice(decide_execution("cuda", "bfloat16", 2, Hardware{1})),
            "pipetrain: note: 2 workers share 1 GPU: their kernels take turns on it and every "
            "tensor between stages goes through host memory (NCCL wants a GPU per worker), so "
            "this runs several times slower than one process (2.7-6.3x for GPT-2 small on an "
            "H200). It checks a pipeline on a small machine; with one GPU, --stages 1 trains "
            "faster");
  const std::string three_on_two = sharing_advice(decide_execution("cuda", "float32", 3, Hardware{2}));
  EXPECT_NE(three_on_two.find("3 workers share 2 GPUs"), std::string::npos);
  EXPECT_EQ(sharing_advice(decide_execution("cuda", "bfloat16", 2, Hardware{2})), "");
  EXPECT_EQ(sharing_advice(decide_execution("cuda", "bfloat16", 1, Hardware{1})), "");
  EXPECT_EQ(sharing_advice(decide_execution("cpu", "float32", 4, Hardware{1})), "");
}

TEST(Execution, WorkersTakeGpusRoundRobinByLocalRank) {
  const Execution e = decide_execution("cuda", "float32", 5, Hardware{2});
  EXPECT_EQ(gpu_of(e, 0), 0);
  EXPECT_EQ(gpu_of(e, 1), 1);
  EXPECT_EQ(gpu_of(e, 4), 0);
}

// Captured graphs need a GPU's stream, for one process or pipeline workers (what their schedule
// must allow is the runtime's: RunSpec.EveryCrossFieldRefusalIsOneLine); emulated ones run anywhere.
TEST(Execution, CapturedGraphsNeedAGpuEmulatedOnesRunAnywhere) {
  const Execution one_gpu = with_cuda_graphs(decide_execution("cuda", "bfloat16", 1, Hardware{1}), 1);
  EXPECT_EQ(one_gpu.graphs, Graphs::Captured);
  EXPECT_EQ(describe(one_gpu), "cuda: 1 GPU, bfloat16 mixed, CUDA graphs");
  EXPECT_EQ(with_cuda_graphs(decide_execution("cuda", "float32", 1, Hardware{1}), 0).graphs, Graphs::Off);
  // "auto" on a machine without a GPU computes on the CPU: no stream to capture on.
  EXPECT_THROW(with_cuda_graphs(decide_execution("auto", "float32", 1, Hardware{0}), 1), UserError);
  const Execution shared = with_cuda_graphs(decide_execution("cuda", "float32", 2, Hardware{1}), 1);
  EXPECT_EQ(shared.graphs, Graphs::Captured);
  EXPECT_EQ(describe(shared), "cuda: 2 workers sharing 1 GPU, gloo (host-staged), float32, CUDA graphs");
  const Execution emulated = with_cuda_graphs(decide_execution("cpu", "float32", 2, Hardware{0}), 2);
  EXPECT_EQ(emulated.graphs, Graphs::Emulated);
  EXPECT_EQ(describe(emulated), "cpu, gloo, float32, CUDA graphs emulated");
}

TEST(Execution, CudaWithoutAGpuAndUnknownNamesAreOneLineErrors) {
  try {
    decide_execution("cuda", "float32", 1, Hardware{0});
    FAIL() << "cuda without a GPU was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("no GPU is usable here"), std::string::npos);
  }
  EXPECT_THROW(decide_execution("tpu", "float32", 1, Hardware{0}), UserError);
  EXPECT_THROW(decide_execution("cpu", "float8", 1, Hardware{0}), UserError);
  EXPECT_EQ(precision_named("bfloat16"), PrecisionKind::BFloat16Mixed);
  EXPECT_EQ(precision_named("float16"), PrecisionKind::Float16Mixed);
}

}  // namespace
}  // namespace pipetrain::device
