#include <gtest/gtest.h>

#include "core/transformer_work.h"

namespace pipetrain {
namespace {

// GPT-2 small's block: 7,087,872 parameters (12 D^2 + 13 D at D = 768, F = 3072), which
// transformers' GPT2Block counts too.
TEST(TransformerWork, Gpt2BlockParametersAreItsWeightsBiasesAndNorms) {
  EXPECT_DOUBLE_EQ(gpt_block_parameters(768, 3072), 7087872);
  EXPECT_DOUBLE_EQ(gpt_block_parameters(16, 64), 12.0 * 16 * 16 + 13 * 16);
}

// Per token, the linears' 24 D^2 FLOPs at F = 4 D (2 x (4 D^2 + 8 D^2)); causal attention over s
// keys 4 s D, over a TeraPipe slice of 8 after 16 tokens of context 4 (16 + 4) D.
TEST(TransformerWork, FlopsAreTwoPerMultiplyAdd) {
  EXPECT_DOUBLE_EQ(gpt_block_linear_flops(1, 768, 4 * 768), 24.0 * 768 * 768);
  EXPECT_DOUBLE_EQ(gpt_block_linear_flops(10, 8, 20), 2.0 * 10 * (4 * 64 + 2 * 8 * 20));
  EXPECT_DOUBLE_EQ(attention_flops(1024, 1024, 768), 4.0 * 1024 * 1024 * 768);
  EXPECT_DOUBLE_EQ(attention_flops(8, 16 + 8 / 2.0, 32), 4.0 * 8 * 20 * 32);
}

}  // namespace
}  // namespace pipetrain
