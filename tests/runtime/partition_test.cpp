#include <gtest/gtest.h>

#include "core/error.h"
#include "model/model.h"
#include "model/registry.h"
#include "runtime/model_costs.h"
#include "runtime/run_spec.h"

namespace pipetrain::runtime {
namespace {

Config config_with(int64_t layers, int64_t stages, const std::string& partition) {
  Config c;
  c.model.layers = layers;
  c.pipeline.stages = stages;
  c.pipeline.partition = partition;
  return c;
}

TEST(Partition, BalancedFollowsComputeNotParameters) {
  // d = 128, V = 256, seq 128: a block is 4.4x the head's compute but the head has the largest
  // parameter share after the embedding; the embedding (a gather and the positions' sum, 2% of a
  // block) joins whichever side.
  const auto costs = model_layer_costs(*make_model(Config{}), 4);
  ASSERT_EQ(costs.size(), 6u);
  EXPECT_GT(costs[1].forward_s, 4 * costs[5].forward_s);
  EXPECT_LT(costs[0].forward_s, 0.03 * costs[1].forward_s);
  const auto two = make_run_spec(config_with(4, 2, "balanced")).ranges;
  EXPECT_EQ(two[0].last, 3);  // [embedding, block 0, block 1 | block 2, block 3, head]
  const auto four = make_run_spec(config_with(6, 4, "balanced")).ranges;
  // 6 blocks over 4 stages: the stage with the head gets one block, never two.
  EXPECT_EQ(four.back().last - four.back().first, 2);
}

// The CNN's balance comes from its own layer_work: at base width 16, block 0 (two 3x3
// convolutions of 16 channels at 28x28) is 4 b 784 9 256 = 7.2M FLOPs per image, each later
// block (half or quarter the resolution, twice or four times the width) 5.9M, the stem 0.2M and
// the head nothing much. GPT's formulas for the same model.* fields would weigh the blocks alike.
TEST(Partition, BalancedFollowsTheCnnsOwnLayerWork) {
  Config c = config_with(3, 2, "balanced");
  c.model.kind = "cnn";
  c.model.d_model = 16;
  const auto model = make_model(c);
  const auto costs = model_layer_costs(*model, 4);
  ASSERT_EQ(costs.size(), 5u);
  EXPECT_EQ(costs[1].name, "block0");
  EXPECT_DOUBLE_EQ(costs[1].param_bytes, 4 * model->layer_work(1, 4).parameters);
  EXPECT_GT(costs[1].forward_s, 1.2 * costs[2].forward_s);
  // [stem, block0 | block1, block2, head]: 7.4 vs 11.8 M per image, where GPT's formulas cut
  // after block 1 (13.3 vs 5.9).
  const auto two = make_run_spec(c).ranges;
  EXPECT_EQ(two[0].last, 2);
  // Three stages: the heavy block 0 gets a stage of its own (with the near-free stem).
  c.pipeline.stages = 3;
  const auto three = make_run_spec(c).ranges;
  EXPECT_EQ(three[0].last, 2);
  EXPECT_EQ(three[1].last, 3);
}

TEST(Partition, ExplicitCountsBecomeContiguousRanges) {
  const auto ranges = make_run_spec(config_with(4, 2, "2,4")).ranges;
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0].first, 0);
  EXPECT_EQ(ranges[0].last, 2);
  EXPECT_EQ(ranges[1].first, 2);
  EXPECT_EQ(ranges[1].last, 6);
}

TEST(Partition, BalancedCoversEveryLayerOnce) {
  const auto ranges = make_run_spec(config_with(6, 4, "balanced")).ranges;
  ASSERT_EQ(ranges.size(), 4u);
  EXPECT_EQ(ranges.front().first, 0);
  EXPECT_EQ(ranges.back().last, 8);
  for (size_t s = 1; s < ranges.size(); ++s) EXPECT_EQ(ranges[s].first, ranges[s - 1].last);
}

TEST(Partition, BadPartitionsAreUserErrors) {
  EXPECT_THROW(make_run_spec(config_with(4, 2, "3,4")), UserError);  // sums to 7, not 6
  EXPECT_THROW(make_run_spec(config_with(4, 2, "6")), UserError);    // one count for 2 stages
  EXPECT_THROW(make_run_spec(config_with(4, 2, "a,b")), UserError);
  EXPECT_THROW(make_run_spec(config_with(4, 2, "0,6")), UserError);
  EXPECT_THROW(make_run_spec(config_with(1, 4, "balanced")), UserError);  // 3 layers, 4 stages
}

// "measured" reaches the run spec unresolved only in a worker nobody resolved it for (torchrun):
// refused there, since every worker would time its own layers; one stage has nothing to cut.
// W is a layer's weight products: the head's X^T dY (2 N D V FLOPs, N tokens), a block's four
// linears (8 N D^2 + 4 N D F) without attention's score products (4 B T^2 D), whose backward is
// all B. Chunked cross-entropy recomputes its logits (2 N D V, and N V float32 values written)
// in the backward: once in a whole one, in each pass of a split one. The default GPT (D 128,
// F 512, V 256, T 128), 4 sequences.
TEST(ModelCosts, WIsTheWeightProductsAndChunkedCrossEntropyRecomputesInEachPass) {
  Config chunked;
  chunked.model.loss_chunk_tokens = 64;
  const auto full = model_layer_costs(*make_model(Config{}), 4);
  const auto chunked_head = model_layer_costs(*make_model(chunked), 4).back();
  const double flops_per_s = ModelCostOptions{}.flops_per_s, n = 4 * 128;
  const double logits_s = 2 * n * 128 * 256 / flops_per_s;
  const double logits_written_s = n * 256 * 4 / ModelCostOptions{}.bytes_per_s;  // recomputed, float32
  const double linears_s = (8 * n * 128 * 128 + 4 * n * 128 * 512) / flops_per_s;
  const auto& block = full[1];
  EXPECT_DOUBLE_EQ(plan::weight_gradient_s(block), linears_s);
  EXPECT_DOUBLE_EQ(plan::input_gradient_s(block), block.backward_s - linears_s);
  EXPECT_GT(plan::input_gradient_s(block), 1.3 * linears_s);  // + 2 x 4 B T^2 D: 33.5M of 201M
  const auto& full_head = full.back();
  EXPECT_DOUBLE_EQ(plan::weight_gradient_s(full_head), logits_s);
  EXPECT_DOUBLE_EQ(plan::input_gradient_s(full_head), full_head.backward_s - logits_s);
  // Their memory-bound passes (GptHeadTraffic): both read the logits once forward (N V); backward
  // the full logits' loss reads them and writes their gradient (2 N V), chunked cross-entropy
  // passes over each recomputed chunk (8 N V) and writes the weight's float32 gradient (V D).
  const double nv_s = n * 256 * 4 / ModelCostOptions{}.bytes_per_s, vd_s = nv_s * 128 / n;
  EXPECT_DOUBLE_EQ(chunked_head.forward_s, full_head.forward_s);
  EXPECT_NEAR(chunked_head.backward_s,
              full_head.backward_s + logits_s + logits_written_s + 6 * nv_s + vd_s, 1e-15);
  EXPECT_DOUBLE_EQ(plan::weight_gradient_s(chunked_head), 2 * logits_s + logits_written_s);
  EXPECT_NEAR(plan::input_gradient_s(chunked_head), full_head.backward_s + logits_written_s + 6 * nv_s + vd_s,
              1e-15);
}

// Few rows slow a device's products (a cluster's half_efficiency_tokens): at a knee of 512 rows
// the default GPT's blocks and head, over 4 x 128 = 512 tokens, take their products' time twice;
// chunked cross-entropy's products run over a chunk (64 rows: 9 times); the embedding has none,
// and every memory-bound pass keeps its time. The cluster's knee reaches `plan --config`.
TEST(ModelCosts, FewRowsSlowTheProductsAtTheClustersKnee) {
  Config chunked;
  chunked.model.loss_chunk_tokens = 64;
  ModelCostOptions knee;
  knee.half_efficiency_rows = 512;
  const double flops_s = 1 / knee.flops_per_s, n = 4 * 128;
  const double block_flops = 8 * n * 128 * 128 + 4 * n * 128 * 512 + 4 * 4 * 128.0 * 128 * 128;
  const double logits_flops = 2 * n * 128 * 256;
  for (const Config& config : {Config{}, chunked}) {
    const auto model = make_model(config);
    const auto plain = model_plan_costs(*model, 4, ModelCostOptions{});
    const auto slowed = model_plan_costs(*model, 4, knee);
    EXPECT_DOUBLE_EQ(slowed[0].forward_s, plain[0].forward_s);
    EXPECT_DOUBLE_EQ(slowed[0].backward_s, plain[0].backward_s);
    EXPECT_NEAR(slowed[1].forward_s - plain[1].forward_s, block_flops * flops_s, 1e-12);
    EXPECT_NEAR(slowed[1].backward_s - plain[1].backward_s, 2 * block_flops * flops_s, 1e-12);
    const double head_extra = config.model.loss_chunk_tokens > 0 ? 8 : 1;
    EXPECT_NEAR(slowed.back().forward_s - plain.back().forward_s, head_extra * logits_flops * flops_s, 1e-12);
  }
  plan::ClusterSpec cluster;
  cluster.half_efficiency_tokens = 300;
  EXPECT_DOUBLE_EQ(model_cost_options(Config{}, cluster).half_efficiency_rows, 300);
  EXPECT_DOUBLE_EQ(cluster.sustained_flops(600), cluster.device_flops * cluster.compute_efficiency * 2 / 3);
  EXPECT_DOUBLE_EQ(plan::small_gemm_share(0, 300), 1);  // rows not known: many
}

// Each operator a pass calls costs its fixed time beside the pass's work (a default GPT-2 block:
// 10 forward, 19 backward, GptLayerTraffic); a host that issues operators to an asynchronous
// device more slowly than the device runs them sets the pace, unless CUDA graphs launch them.
TEST(ModelCosts, OperatorsCostTheirFixedTimeAndASlowHostSetsThePace) {
  const auto model = make_model(Config{});
  const auto plain = model_plan_costs(*model, 4, ModelCostOptions{});
  ModelCostOptions fixed;
  fixed.seconds_per_operator = 1e-6;
  const auto with_fixed = model_plan_costs(*model, 4, fixed);
  EXPECT_NEAR(with_fixed[1].forward_s - plain[1].forward_s, 10e-6, 1e-15);
  EXPECT_NEAR(with_fixed[1].backward_s - plain[1].backward_s, 19e-6, 1e-15);
  EXPECT_NEAR(plan::input_gradient_s(with_fixed[1]) - plan::input_gradient_s(plain[1]), 19e-6, 1e-15);
  // The head with its loss (GptHeadTraffic): 19 forward, 14 backward on a CPU (one block).
  EXPECT_NEAR(with_fixed.back().forward_s - plain.back().forward_s, 19e-6, 1e-15);
  EXPECT_NEAR(with_fixed.back().backward_s - plain.back().backward_s, 14e-6, 1e-15);
  ModelCostOptions slow_host = fixed;
  slow_host.launch_seconds_per_operator = 1;  // far slower than the block's work
  const auto host_bound = model_plan_costs(*model, 4, slow_host);
  EXPECT_DOUBLE_EQ(host_bound[1].forward_s, 10.0);
  EXPECT_DOUBLE_EQ(host_bound[1].backward_s, 19.0);
  plan::ClusterSpec gpu;
  gpu.operator_s = 2e-6;
  gpu.launch_s = 9e-6;
  Config eager, graphed;
  graphed.train.cuda_graphs = 1;
  EXPECT_DOUBLE_EQ(model_cost_options(eager, gpu).seconds_per_operator, 2e-6);
  EXPECT_DOUBLE_EQ(model_cost_options(eager, gpu).launch_seconds_per_operator, 9e-6);
  EXPECT_DOUBLE_EQ(model_cost_options(graphed, gpu).seconds_per_operator, 2e-6);
  EXPECT_DOUBLE_EQ(model_cost_options(graphed, gpu).launch_seconds_per_operator, 0);
}

// A GPU runs the head's loss in a kernel of its own each way (loss/softmax_cross_entropy.cu),
// where a CPU checks the targets (5 operators) and runs 7 operators forward and 8 backward over
// each block of rows (here 1; GptHeadTraffic): a GPU cluster's plan takes the kernels'. Both
// read the logits once each way and write their gradient; the blocks' work is the same on both.
TEST(ModelCosts, AGpuRunsTheHeadsLossInItsOwnKernels) {
  const Config config;
  const auto model = make_model(config);
  ModelCostOptions cpu;
  cpu.seconds_per_operator = 1e-6;
  ModelCostOptions gpu = cpu;
  gpu.gpu = true;
  const auto on_cpu = model_plan_costs(*model, 4, cpu), on_gpu = model_plan_costs(*model, 4, gpu);
  EXPECT_NEAR(on_cpu.back().forward_s - on_gpu.back().forward_s, 11e-6, 1e-15);
  EXPECT_NEAR(on_cpu.back().backward_s - on_gpu.back().backward_s, 7e-6, 1e-15);
  EXPECT_DOUBLE_EQ(on_gpu[1].forward_s, on_cpu[1].forward_s);
  EXPECT_DOUBLE_EQ(on_gpu[1].backward_s, on_cpu[1].backward_s);
  plan::ClusterSpec cluster;
  EXPECT_TRUE(model_cost_options(config, cluster).gpu);
  cluster.gpus = false;
  EXPECT_FALSE(model_cost_options(config, cluster).gpu);
}

// The update streams memory: AdamW reads and writes the weight and its two moments and reads the
// gradient twice (the global norm, the step): 8 values a parameter; plain SGD 4, with weight
// decay 6 (its decayed gradient, written and read). Its time is those bytes at bytes_per_s.
TEST(ModelCosts, TheUpdateStreamsEachParametersValuesAtTheMemoryRate) {
  TrainConfig adamw, sgd, decayed_sgd;
  adamw.optimizer = "adamw";
  sgd.optimizer = decayed_sgd.optimizer = "sgd";
  sgd.momentum = decayed_sgd.momentum = 0;
  sgd.weight_decay = 0;
  decayed_sgd.weight_decay = 0.1;
  EXPECT_DOUBLE_EQ(optimizer_traffic_values(adamw), 8);
  EXPECT_DOUBLE_EQ(optimizer_traffic_values(sgd), 4);
  EXPECT_DOUBLE_EQ(optimizer_traffic_values(decayed_sgd), 6);
  Config config;
  config.train.optimizer = "adamw";
  const ModelCostOptions options = model_cost_options(config);
  for (const auto& layer : model_plan_costs(*make_model(config), 4, options)) {
    EXPECT_DOUBLE_EQ(layer.optimizer_s, 8 * layer.param_bytes / options.bytes_per_s) << layer.name;
    EXPECT_GT(layer.optimizer_s, 0) << layer.name;
  }
}

// A CNN layer's forward is its convolutions' products at the compute rate plus its memory-bound
// passes at the memory rate: per convolution output (S values) a BatchNorm reads it twice and
// writes it once, a ReLU reads and writes it, the residual sum reads two and writes one. The
// example's shape (stem 12 channels at 28x28, blocks of 12/24/48), 40 images, float32.
TEST(ModelCosts, ACnnLayersNormsReluAndResidualSumTakeMemoryTime) {
  Config config;
  config.model.kind = "cnn";
  config.model.layers = 3;
  config.model.d_model = 12;
  const ModelCostOptions options;
  const auto costs = model_layer_costs(*make_model(config), 40);
  ASSERT_EQ(costs.size(), 5u);
  const double byte_s = 1 / options.bytes_per_s, flop_s = 1 / options.flops_per_s;
  const auto expected = [&](double flops, double parameters, double out, double traffic) {
    return flops * flop_s + (parameters + out + traffic) * 4 * byte_s;
  };
  const auto near = [](double expected_s) { return 1e-12 * expected_s; };
  const double s0 = 40.0 * 12 * 28 * 28;  // the stem's and block 0's outputs
  const double conv0 = 2 * s0 * 9, conv12 = 2 * s0 * 12 * 9;  // 1 -> 12, 12 -> 12 channels
  const double stem_s = expected(conv0, 9 * 12 + 24, s0, (3 + 2) * s0);
  EXPECT_NEAR(costs[0].forward_s, stem_s, near(stem_s));
  // Block 0 keeps its width: two BatchNorms, two ReLUs, the sum.
  const double block0_s = expected(2 * conv12, 2 * (12 * 12 * 9 + 24), s0, (2 * 3 + 2 * 2 + 3) * s0);
  EXPECT_NEAR(costs[1].forward_s, block0_s, near(block0_s));
  // Block 1 halves the size and doubles the width: its 1x1 shortcut has a third BatchNorm.
  const double s1 = 40.0 * 24 * 14 * 14;
  const double flops1 = 2 * s1 * (12 * 9 + 24 * 9 + 12);
  const double parameters1 = 12 * 24 * 9 + 24 * 24 * 9 + 12 * 24 + 3 * 48;
  const double block1_s = expected(flops1, parameters1, s1, (3 * 3 + 2 * 2 + 3) * s1);
  EXPECT_NEAR(costs[2].forward_s, block1_s, near(block1_s));
  // The head's pooling reads block 2's output.
  const double s2 = 40.0 * 48 * 7 * 7;
  const double head_s = expected(2 * 40.0 * 48 * 10, 49 * 10, 40 * 10, s2);
  EXPECT_NEAR(costs[4].forward_s, head_s, near(head_s));
}

// The transducer's joint layer at examples/speech.toml's shape (d 128, 408 frames: 102 encoder
// frames, 80 labels, V 29), 4 utterances, float32. Its products: the encoder's projection and
// the predictor (d^2 a frame, 9 d^2 a label), and the joint network's d v + d a (frame, label)
// pair over 41 labels on average; its memory-bound passes a pair: 15 over the d-wide hidden and
// 9 over the v logits (the sample-wise loss), or the batched reference's 9 d + 4 v forward and
// 6 d + 3 v backward over every padded pair (81 label positions). The sample-wise loss runs the
// joint's backward in its forward: its backward is the projections' alone.
TEST(ModelCosts, TheSampleWiseJointDoesItsBackwardInItsForward) {
  Config config;
  config.model.kind = "transducer";
  config.model.layers = 3;
  config.model.d_model = 128;
  config.model.heads = 4;
  config.model.seq_len = 408;
  config.model.max_labels = 80;
  const ModelCostOptions options;
  const double byte_s = 4 / options.bytes_per_s, flop_s = 1 / options.flops_per_s;
  const double b = 4, t = 102, d = 128, v = 29, labels = 41;
  const double parameters = 2 * (d * d + d) + v * d + 8 * d * d + 8 * d + d * v + v;
  const double streaming_s = (parameters + b * t * (d + 1)) * byte_s;
  const double projections = 2 * b * (t * d * d + labels * 9 * d * d);
  const double pairs = b * t * labels, joint = 2 * pairs * (d * v + d);
  const auto near = [](double expected_s) { return 1e-12 * expected_s; };

  const auto sample_wise = model_layer_costs(*make_model(config), 4).back();
  const double forward_s = streaming_s + (projections + 3 * joint) * flop_s + pairs * (15 * d + 9 * v) * byte_s;
  EXPECT_NEAR(sample_wise.forward_s, forward_s, near(forward_s));
  const double backward_s = 2 * streaming_s + 2 * projections * flop_s;
  EXPECT_NEAR(sample_wise.backward_s, backward_s, near(backward_s));

  config.model.transducer_loss = "batched";
  const auto batched = model_layer_costs(*make_model(config), 4).back();
  const double padded = b * t * 81, padded_joint = 2 * padded * (d * v + d);
  const double batched_forward_s =
      streaming_s + (projections + padded_joint) * flop_s + padded * (9 * d + 4 * v) * byte_s;
  EXPECT_NEAR(batched.forward_s, batched_forward_s, near(batched_forward_s));
  const double batched_backward_s =
      2 * streaming_s + 2 * (projections + padded_joint) * flop_s + padded * (6 * d + 3 * v) * byte_s;
  EXPECT_NEAR(batched.backward_s, batched_backward_s, near(batched_backward_s));
}

TEST(Partition, MeasuredIsTheLaunchersToResolve) {
  try {
    make_run_spec(config_with(4, 2, "measured"));
    FAIL() << "an unresolved measured partition was accepted";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("decided by pipetrain's launcher"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(make_run_spec(config_with(4, 1, "measured")).ranges.size(), 1u);
  // Balancing given costs: the cut that evens the stages' sums (1 | 1 1 | 3 over 3 stages).
  std::vector<plan::LayerCost> costs(4);
  for (size_t i = 0; i < costs.size(); ++i) costs[i].forward_s = i == 3 ? 3.0 : 1.0;
  EXPECT_EQ(balanced_layer_counts(costs, 3, schedule::schedule_entry("1f1b")),
            (std::vector<int64_t>{1, 2, 1}));
}

}  // namespace
}  // namespace pipetrain::runtime
