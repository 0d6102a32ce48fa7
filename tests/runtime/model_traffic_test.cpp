// The planner's traffic model of a layer (Model::layer_work's forward and backward traffic
// values, which runtime::model_plan_costs turns into time at the memory bandwidth) against
// counted_work: the bytes that the memory-bound operators of a stage of one GPT-2 or Llama block or
// embedding (or the head with its loss) read and write as it runs, the first microbatch's forward
// and backward; and the operators each pass calls.
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

// The head with its loss: the last stage's forward (the final norm, the logits, the loss) and its
// backward from the loss, as a CPU runs them (Model::layer_work; a GPU's fused loss kernels,
// LayerWork::on_gpu, are the kernels' own contract: loss/softmax_cross_entropy.h). Vocabularies of
// 4096 keep the O(N) terms the model leaves out (a few values a token) under 1%.
class GptHeadTraffic : public ::testing::TestWithParam<LayerCase> {};

// Counted beyond the model with full logits: the CPU loss's passes over a widened block of rows in
// its caches (loss/softmax_cross_entropy.cpp; r float32 values an activation value): forward the
// largest logit, the widened copy written, the shift and the exponential in place, the sum
// (1 + 6 r N V beyond the one read of the logits); backward the copy written, two shifts, the
// exponential, the targets' -1 and the scale in place, the gradient copied out (1 + 12 r N V).
TEST_P(GptHeadTraffic, MemoryBoundBytesMatchTheCountedOperators) {
  const LayerUnderTest t(GetParam());
  ASSERT_TRUE(t.last);
  const auto [forward, backward] = counted_passes(*t.stage, t.input, t.tokens);
  const LayerWork work = t.model->layer_work(t.layer, t.rows);
  const double activation = double(c10::elementSize(t.model->boundary_spec(1, t.rows).dtype));  // bytes
  const auto& model = t.config.model;
  const double r = model.dtype == "bfloat16" ? 2 : 1, logits = double(t.rows * model.seq_len * model.vocab_size);
  const double cached = model.loss_chunk_tokens > 0 ? 0 : 1;
  const double forward_bytes = (work.forward_traffic_values + cached * (1 + 6 * r) * logits) * activation;
  const double backward_bytes = (work.backward_traffic_values + cached * (1 + 12 * r) * logits) * activation;
  EXPECT_NEAR(forward.traffic_bytes, forward_bytes, 0.01 * forward_bytes);
  EXPECT_NEAR(backward.traffic_bytes, backward_bytes, 0.01 * backward_bytes);
}

TEST_P(GptHeadTraffic, OperatorsAreTheCountedOnes) {
  const LayerUnderTest t(GetParam());
  const auto [forward, backward] = counted_passes(*t.stage, t.input, t.tokens);
  const LayerWork work = t.model->layer_work(t.layer, t.rows);
  EXPECT_EQ(work.forward_operators, forward.operators);
  EXPECT_EQ(work.backward_operators, backward.operators);
}

// (A vocabulary of 4096 takes 256 rows a block on a CPU, of 8192 128: the 256 tokens in 2 blocks;
// 4100 is padded to 4160 under mixed precision; chunks of 64 tokens: 4 of them.)
INSTANTIATE_TEST_SUITE_P(Gpt, GptHeadTraffic,
                         ::testing::Values(LayerCase{"full_logits", 3, 0, 128, 4096},
                                           LayerCase{"full_logits_two_blocks", 3, 0, 128, 8192},
                                           LayerCase{"full_logits_d128_t64", 3, 0, 64, 4096, "float32", 128},
                                           LayerCase{"float64_full_logits", 3, 0, 128, 4096, "float64"},
                                           LayerCase{"bfloat16_full_logits", 3, 0, 128, 4096, "bfloat16"},
                                           LayerCase{"bfloat16_padded_full_logits", 3, 0, 128, 4100, "bfloat16"},
                                           LayerCase{"bfloat16_padded_two_blocks", 3, 0, 128, 8200, "bfloat16"},
                                           LayerCase{"chunked", 3, 64, 128, 4096},
                                           LayerCase{"chunked_d128_t64", 3, 32, 64, 4096, "float32", 128},
                                           LayerCase{"float64_chunked", 3, 64, 128, 4096, "float64"},
                                           LayerCase{"bfloat16_chunked", 3, 64, 128, 4096, "bfloat16"}),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Llama, GptHeadTraffic,
                         ::testing::Values(llama(LayerCase{"full_logits", 3, 0, 128, 4096}),
                                           llama(LayerCase{"float64_full_logits", 3, 0, 128, 4096, "float64"}),
                                           llama(LayerCase{"bfloat16_full_logits", 3, 0, 128, 4096, "bfloat16"}),
                                           llama(LayerCase{"bfloat16_padded_full_logits", 3, 0, 64, 4100, "bfloat16", 128}),
                                           llama(LayerCase{"chunked", 3, 64, 128, 4096}),
                                           llama(LayerCase{"float64_chunked", 3, 64, 128, 4096, "float64"}),
                                           llama(LayerCase{"bfloat16_chunked", 3, 64, 128, 4096, "bfloat16"})),
                         [](const auto& info) { return info.param.name; });

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
