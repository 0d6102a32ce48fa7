// The planner's memory under train.cuda_graphs (plan/graph_memory.h), in closed form on six equal
// layers of a model run here, on 2 workers (3 layers each) with m = 4 microbatches.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "plan/graph_memory.h"
#include "plan/planner.h"

namespace pipetrain::plan {
namespace {

// Per layer: 1 kB of weights, 2 kB of optimizer state, 1 kB of activations, a 500 B workspace,
// 300 B of optimizer workspace; a stage receives 50 B and sends 100 B a microbatch. A stage:
// W = 3 kB, per microbatch A = 50 + 3000, workspace 500, input 50, output 100.
PlanRequest six_layers(bool cuda_graphs, double param_bytes = 1e3, double memory_bytes = 1e12) {
  PlanRequest request;
  request.model.name = "six";
  request.for_pipetrain_runtime = true;
  request.cuda_graphs = cuda_graphs;
  request.cluster = parse_cluster_toml(
      "name = \"two\"\nnodes = 1\ndevices_per_node = 2\ndevice_memory_gb = 1000\n"
      "device_tflops = 100\n", "two.toml");
  request.cluster.device_memory_bytes = memory_bytes;
  request.global_batch = 4;  // m = 4 microbatches of 1
  PlanRequest::ModelVariant variant;
  variant.costs = [param_bytes](int64_t) {
    std::vector<LayerCost> layers(6);
    for (auto& layer : layers) {
      layer.forward_s = 1e-3, layer.backward_s = 2e-3;
      layer.param_bytes = param_bytes, layer.optimizer_bytes = 2 * param_bytes;
      layer.activation_bytes = 1e3;
      layer.input_bytes = 50, layer.output_bytes = 100;
      layer.workspace_bytes = 500, layer.optimizer_workspace_bytes = 300;
    }
    return layers;
  };
  request.model_variants = {variant};
  return request;
}

// Each worker's memory, graphed minus eager.
std::vector<double> graphs_add(const std::string& schedule, bool recompute) {
  const PlanCandidate eager = evaluate_candidate(six_layers(false), schedule, 2, 1, recompute);
  const PlanCandidate graphed = evaluate_candidate(six_layers(true), schedule, 2, 1, recompute);
  EXPECT_TRUE(eager.fits && graphed.fits) << eager.rejected << graphed.rejected;
  EXPECT_EQ(eager.partition, (std::vector<int>{3, 3}));
  std::vector<double> added;
  for (size_t w = 0; w < 2; ++w)
    added.push_back(graphed.worker_memory_bytes.at(w) - eager.worker_memory_bytes.at(w));
  return added;
}

// 1F1B: worker w has 2 - w slots, each keeping A, its workspace and the 150 B left in its pool;
// the transfers' 200 B and the optimizer's 300 B beside them. Eager: the slots' activations and
// one workspace: worker 0 holds 2 x 3050 + 500, worker 1 3050 + 500 and the gradient it sent
// for the previous microbatch (100 B), which it lets go when worker 0's next activation shows
// it arrived (schedule/send_release.h); graphed, that gradient is among the transfers.
TEST(GraphMemory, EachSlotKeepsItsActivationsAndWorkspace) {
  const double slot = 3050 + 150 + 500;
  const auto added = graphs_add("1f1b", false);
  EXPECT_DOUBLE_EQ(added[0], 2 * slot + 200 + 300 - (2 * 3050 + 500));
  EXPECT_DOUBLE_EQ(added[1], slot + 200 + 300 - (3050 + 500 + 100));
}

// Recomputing 1F1B: slots keep their input (and outputs), one shared pool rebuilds a
// microbatch's 3 kB of activations beside the workspace, as the eager run does once.
TEST(GraphMemory, RecomputingSlotsShareOnePool) {
  const auto added = graphs_add("1f1b", true);
  const double shared = 3000 + 500;
  EXPECT_DOUBLE_EQ(added[0], 2 * (50 + 150) + shared + 200 + 300 - (2 * 50 + 500 + 3000));
  EXPECT_DOUBLE_EQ(added[1], (50 + 150) + shared + 200 + 300 - (50 + 500 + 3000 + 100));
}

// 2BW (no flush, stashing): one more copy of the 3 kB of weights, and the capture step holds the
// eager run's memory and the slots (2 on worker 0, 1 on worker 1) with the transfers.
TEST(GraphMemory, NoFlushCaptureHoldsTheEagerRunAndTheSlots) {
  const double slot = 3050 + 150 + 500;
  const auto added = graphs_add("2bw", false);
  EXPECT_DOUBLE_EQ(added[0], 3000 + 2 * slot + 200);
  EXPECT_DOUBLE_EQ(added[1], 3000 + slot + 200);
}

// The single-process trainer's one graph of its step: no slots, the eager memory.
TEST(GraphMemory, OneProcessIsCountedAsEager) {
  PlanRequest eager = six_layers(false), graphed = six_layers(true);
  eager.cluster.devices_per_node = graphed.cluster.devices_per_node = 1;
  const PlanCandidate a = evaluate_candidate(eager, "1f1b", 1, 1, false);
  const PlanCandidate b = evaluate_candidate(graphed, "1f1b", 1, 1, false);
  ASSERT_TRUE(a.fits && b.fits) << a.rejected << b.rejected;
  EXPECT_DOUBLE_EQ(a.peak_memory_bytes, b.peak_memory_bytes);
}

// The partitioner counts the slots too. With 100 B of weights a layer and 8000 B a device, 1F1B's
// even cut fits eagerly (stage 0: 900 of weights and state + 2 x 3050 + 500 + 300 = 7800) but not
// graphed (900 + 2 x 3700 + 200 + 300 = 8800): the graphed plan moves a layer off the first
// stage, which holds 2 slots (600 + 2 x 2700 + 500 = 6500; stage 1: 1200 + 4700 + 500 = 6400).
TEST(GraphMemory, ThePartitionMakesRoomForTheSlots) {
  const PlanCandidate eager = evaluate_candidate(six_layers(false, 100, 8000), "1f1b", 2, 1, false);
  const PlanCandidate graphed = evaluate_candidate(six_layers(true, 100, 8000), "1f1b", 2, 1, false);
  ASSERT_TRUE(eager.fits && graphed.fits) << eager.rejected << graphed.rejected;
  EXPECT_EQ(eager.partition, (std::vector<int>{3, 3}));
  EXPECT_EQ(graphed.partition, (std::vector<int>{2, 4}));
  EXPECT_DOUBLE_EQ(graphed.worker_memory_bytes.at(0), 6500);
  EXPECT_DOUBLE_EQ(graphed.worker_memory_bytes.at(1), 6400);
}

TEST(GraphMemory, SlotBytesInClosedForm) {
  GraphedChunk whole, recomputed;
  whole.parts.per_microbatch = 10, whole.parts.workspace = 5, whole.slots = 3;
  whole.input_bytes = 1, whole.output_bytes = 2;
  recomputed.parts.per_microbatch = 1, recomputed.parts.once = 40, recomputed.parts.workspace = 7;
  recomputed.slots = 2, recomputed.shared_pool = true;
  EXPECT_DOUBLE_EQ(graphed_slot_bytes({whole}), 3 * (10 + 3 + 5));
  EXPECT_DOUBLE_EQ(graphed_slot_bytes({whole, recomputed}), 3 * 18 + 2 * 1 + 47);
  EXPECT_DOUBLE_EQ(graphed_transfer_bytes({whole, recomputed}), 2 * 1 + 2);
}

}  // namespace
}  // namespace pipetrain::plan
