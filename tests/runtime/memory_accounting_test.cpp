// The counting allocator counts exactly the bytes of the tensors it sees, and the walked byte
// counts equal closed forms from the parameter count N (float32): weights 4N, gradients 4N,
// optimizer state 8N for Adam/AdamW (exp_avg, exp_avg_sq), 4N for SGD-momentum, 0 for plain SGD.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/gpt.h"
#include "runtime/memory_accounting.h"
#include "train/optim.h"
#include "train/trainer.h"

namespace pipetrain::runtime {
namespace {

TEST(CountingAllocator, PeakRisesByExactlyOneTensorsBytes) {
  CountingAllocator& allocator = CountingAllocator::install();
  const int64_t live_before = allocator.live_bytes();
  allocator.reset_peak();
  EXPECT_EQ(allocator.peak_bytes(), live_before);
  {
    auto floats = torch::empty({1000, 3}, torch::kFloat32);
    EXPECT_EQ(allocator.live_bytes() - live_before, 12000);
    EXPECT_EQ(allocator.peak_bytes() - live_before, 12000);
    auto doubles = torch::ones({250}, torch::kFloat64);
    EXPECT_EQ(allocator.peak_bytes() - live_before, 12000 + 2000);
  }
  EXPECT_EQ(allocator.live_bytes(), live_before);             // both freed
  EXPECT_EQ(allocator.peak_bytes() - live_before, 14000);     // the high-water mark stays
  allocator.reset_peak();
  EXPECT_EQ(allocator.peak_bytes(), live_before);
  EXPECT_EQ(&CountingAllocator::install(), &allocator);       // installed once
}

// An action's window (trace.json) has its own peak: resetting it leaves the step's alone.
TEST(MemoryWatch, AnActionsPeakIsItsOwnAndTheStepsKeepsEveryAction) {
  CountingAllocator& allocator = CountingAllocator::install();
  MemoryWatch watch(allocator, torch::kCPU);
  watch.begin_step();
  const int64_t base = watch.live_bytes();
  watch.begin_action();
  { auto big = torch::empty({4000}, torch::kFloat32); }  // 16000 bytes, freed
  const ActionMemory first = watch.end_action(0);
  EXPECT_EQ(first.peak - base, 16000);
  EXPECT_EQ(first.live, base);
  auto kept = torch::empty({500}, torch::kFloat64);  // 4000 bytes between the actions
  watch.begin_action();
  { auto small = torch::empty({250}, torch::kFloat32); }  // 1000 bytes beside the kept ones
  const ActionMemory second = watch.end_action(0);
  EXPECT_EQ(second.peak - base, 4000 + 1000);
  EXPECT_EQ(second.live - base, 4000);
  EXPECT_EQ(watch.step_peak_bytes() - base, 16000);  // the first action's, not reset
  watch.begin_step();
  EXPECT_EQ(watch.step_peak_bytes() - base, 4000);
}

TEST(StorageBytes, CountsASharedStorageOnce) {
  auto base = torch::zeros({10, 10});
  EXPECT_EQ(storage_bytes({base, base.slice(0, 0, 5), base.view({100}), torch::Tensor()}), 400);
  EXPECT_EQ(storage_bytes({base, torch::zeros({3}, torch::kFloat64)}), 400 + 24);
}

struct OptimizerCase {
  std::string optimizer;
  double momentum;
  int64_t state_floats_per_parameter;
};

void PrintTo(const OptimizerCase& c, std::ostream* out) {
  *out << c.optimizer << " momentum=" << c.momentum;
}

class OptimizerStateBytes : public ::testing::TestWithParam<OptimizerCase> {};

TEST_P(OptimizerStateBytes, EqualTheClosedFormAfterOneStep) {
  CountingAllocator& allocator = CountingAllocator::install();
  GptConfig gpt;
  gpt.d_model = 32;
  gpt.heads = 2;
  gpt.layers = 2;
  gpt.seq_len = 16;
  auto model = make_gpt(gpt, 1);
  TrainConfig train;
  train.optimizer = GetParam().optimizer;
  train.momentum = GetParam().momentum;
  auto params = model->parameters();
  auto optimizer = make_optimizer(params, train);
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();

  MemoryWatch watch(allocator, torch::kCPU);
  watch.begin_step();
  auto tokens = torch::randint(0, 256, {4, 16}, torch::kInt64);
  lm_loss(model->forward(tokens), tokens).backward();
  optimizer->step();
  const MemoryReport report = measure_memory(watch, params, *optimizer);
  EXPECT_EQ(report.weights, 4 * n);
  EXPECT_EQ(report.gradients, 4 * n);
  EXPECT_EQ(report.optimizer, 4 * n * GetParam().state_floats_per_parameter);
  // Weights were allocated before the peak was reset; gradients, state and the forward's
  // activations after: the live bytes hold all three kinds and the step peaked above them.
  EXPECT_GE(report.live, report.weights + report.gradients + report.optimizer);
  EXPECT_GT(report.activations_peak(), 0);
}

INSTANTIATE_TEST_SUITE_P(Runtime, OptimizerStateBytes,
                         ::testing::Values(OptimizerCase{"adam", 0.9, 2},
                                           OptimizerCase{"adamw", 0.9, 2},
                                           OptimizerCase{"sgd", 0.9, 1},
                                           OptimizerCase{"sgd", 0.0, 0}),
                         [](const auto& info) {
                           const auto& c = info.param;
                           if (c.optimizer != "sgd") return c.optimizer;
                           return c.optimizer + (c.momentum > 0 ? "_momentum" : "_plain");
                         });

TEST(MemoryFields, ArraysByRankInMegabytes) {
  MemoryReport a{1 << 20, 3 << 20, 1 << 19, 1 << 19, 1 << 20};
  a.graph_pools = 3 << 19;
  const auto fields = memory_fields({a, MemoryReport{}});
  EXPECT_EQ(fields["mem_graph_pools_mb"], nlohmann::json::array({1.5, 0.0}));
  EXPECT_EQ(fields["mem_peak_mb"], nlohmann::json::array({3.0, 0.0}));
  EXPECT_EQ(fields["mem_optimizer_mb"][0], 1.0);
  EXPECT_EQ(fields["mem_activations_peak_mb"][0], 1.0);  // 3 - (0.5 + 0.5 + 1)
}

TEST(MemoryFields, TheTableLineNamesTheGraphPoolsWhereThereAreSome) {
  MemoryReport r{0, 4 << 20, 1 << 20, 1 << 20, 1 << 20};
  EXPECT_EQ(describe_memory("w", r),
            "w: peak 4.0 MiB = weights 1.0 + grads 1.0 + optimizer 1.0 + activations and other 1.0");
  r.graph_pools = 1 << 19;  // (a part of the activations and other)
  EXPECT_EQ(describe_memory("w", r), "w: peak 4.0 MiB = weights 1.0 + grads 1.0 + optimizer 1.0 + "
                                     "activations and other 1.0 (of which CUDA graphs' pools 0.5)");
}

}  // namespace
}  // namespace pipetrain::runtime
