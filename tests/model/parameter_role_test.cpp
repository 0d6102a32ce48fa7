// parameter_role names every parameter a GPT stage registers, whatever the cut: the hidden
// matrices are exactly the blocks' 2-D weights (4 per block), every other tensor is an
// embedding, the head's tied copy, a gain or a bias.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

#include "model/gpt.h"
#include "model/parameter_role.h"

namespace pipetrain {
namespace {

std::map<ParameterRole, int> roles_of(GptStack& stack) {
  std::map<ParameterRole, int> count;
  for (const auto& item : stack.named_parameters()) {
    const ParameterRole role = parameter_role(item.key());
    ++count[role];
    const bool matrix = item.value().dim() == 2;
    if (role == ParameterRole::Hidden) EXPECT_TRUE(matrix) << item.key();
    if (role == ParameterRole::Gain || role == ParameterRole::Bias) EXPECT_FALSE(matrix) << item.key();
  }
  return count;
}

TEST(ParameterRole, ClassifiesEveryParameterOfEveryStage) {
  GptConfig config;
  config.layers = 3;
  config.d_model = 8;
  config.heads = 2;
  config.seq_len = 4;
  GptStack whole(config, 1, 0, config.layer_count());  // the head shares the token weight
  auto roles = roles_of(whole);
  EXPECT_EQ(roles[ParameterRole::Hidden], 4 * 3);
  EXPECT_EQ(roles[ParameterRole::Embedding], 2);
  EXPECT_EQ(roles[ParameterRole::Head], 0);
  EXPECT_EQ(roles[ParameterRole::Gain], 2 * 3 + 1);
  EXPECT_EQ(roles[ParameterRole::Bias], (2 + 4) * 3 + 1);  // ln1, ln2, 4 linears; ln_f

  GptStack last(config, 1, 3, config.layer_count());  // block 2 and the head with its own copy
  roles = roles_of(last);
  EXPECT_EQ(roles[ParameterRole::Hidden], 4);
  EXPECT_EQ(roles[ParameterRole::Head], 1);
  EXPECT_EQ(roles[ParameterRole::Embedding], 0);
}

TEST(ParameterRole, RefusesNamesTheModelDoesNotRegister) {
  EXPECT_THROW(parameter_role("layer1.mystery.weight"), std::invalid_argument);
  EXPECT_THROW(parameter_role("qkv.weight"), std::invalid_argument);
}

}  // namespace
}  // namespace pipetrain
