// The planner's traffic model of a layer (Model::layer_work's forward and backward traffic
// values, which runtime::model_plan_costs turns into time at the memory bandwidth) against
// counted_work: the bytes that the memory-bound operators of a stage of one GPT-2 or Llama block or
// embedding read and write as it runs, the first microbatch's forward and backward; and the
// operators each pass calls.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "counted_passes.h"
#include "layer_under_test.h"

namespace pipetrain::runtime {
namespace {

class GptLayerTraffic : public ::testing::TestWithParam<LayerCase> {};

TEST_P(GptLayerTraffic, MemoryBoundBytesMatchTheCountedOperators) {
  const LayerUnderTest t(GetParam());
  const auto [forward, backward] = counted_passes(*t.stage, t.input);

  const LayerWork work = t.model->layer_work(t.layer, t.rows);
  const bool mixed = t.config.model.dtype == "bfloat16";
  const double activation = double(c10::elementSize(t.model->boundary_spec(1, t.rows).dtype));  // bytes
  // Mixed precision's backward also widens each bfloat16 weight gradient of a block's products
  // into its float32 one (2 bytes read, 4 written a parameter): the cost model counts that with
  // the parameters' streaming, not here. (The embedding computes in float32.)
  const double gradient_casts = mixed && t.layer > 0 ? 6 * work.parameters : 0;
  const double forward_bytes = work.forward_traffic_values * activation;
  const double backward_bytes = work.backward_traffic_values * activation + gradient_casts;
  // (The norms' weights and statistics, the biases' gradients and the rotary tables' positions,
  // O(N + D) values, are left out: under 1% at these shapes.)
  EXPECT_NEAR(forward.traffic_bytes, forward_bytes, 0.01 * forward_bytes);
  EXPECT_NEAR(backward.traffic_bytes, backward_bytes, 0.01 * backward_bytes);
  EXPECT_GT(forward_bytes, 0);
}

// Each layer's operators (the fixed cost each has on a device), exactly.
TEST_P(GptLayerTraffic, OperatorsAreTheCountedOnes) {
  const LayerUnderTest t(GetParam());
  const auto [forward, backward] = counted_passes(*t.stage, t.input);
  const LayerWork work = t.model->layer_work(t.layer, t.rows);
  EXPECT_EQ(work.forward_operators, forward.operators);
  EXPECT_EQ(work.backward_operators, backward.operators);
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptLayerTraffic,
                         ::testing::Values(LayerCase{"block", 1, 0, 128, 512},
                                           LayerCase{"block_d128", 1, 0, 128, 512, "float32", 128},
                                           LayerCase{"block_t64_ffn512", 1, 0, 64, 512, "float32", 64, "gpt", 512},
                                           LayerCase{"bfloat16_block", 1, 0, 128, 512, "bfloat16"},
                                           LayerCase{"bfloat16_long_block", 1, 0, 256, 1024, "bfloat16"},
                                           LayerCase{"bfloat16_block_d128", 1, 0, 128, 512, "bfloat16", 128},
                                           LayerCase{"float64_block", 1, 0, 128, 512, "float64"},
                                           LayerCase{"embedding", 0, 0, 128, 512},
                                           LayerCase{"long_embedding", 0, 0, 256, 1024},
                                           LayerCase{"bfloat16_embedding", 0, 0, 128, 512, "bfloat16"}),
                         [](const auto& info) { return info.param.name; });

// 4 query heads sharing 2 key/value heads (layer_under_test.h), RMSNorm in float32 under mixed
// precision, rotary positions recomputed in float64 by each block.
INSTANTIATE_TEST_SUITE_P(Llama, GptLayerTraffic,
                         ::testing::Values(llama(LayerCase{"block", 1, 0, 128, 512}),
                                           llama(LayerCase{"block_d128_t64", 1, 0, 64, 512, "float32", 128}),
                                           llama(LayerCase{"block_ffn512", 1, 0, 128, 512, "float32", 64, "llama", 512}),
                                           llama(LayerCase{"bfloat16_block", 1, 0, 128, 512, "bfloat16"}),
                                           llama(LayerCase{"bfloat16_block_d128", 1, 0, 256, 512, "bfloat16", 128}),
                                           llama(LayerCase{"float64_block", 1, 0, 128, 512, "float64"}),
                                           llama(LayerCase{"embedding", 0, 0, 128, 512}),
                                           llama(LayerCase{"bfloat16_embedding", 0, 0, 128, 512, "bfloat16"})),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pipetrain::runtime
