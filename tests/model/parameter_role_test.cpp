// parameter_role names every parameter a GPT stage registers, whatever the cut: the hidden
// matrices are exactly the blocks' 2-D weights (4 per block), every other tensor is an
// embedding, the head's tied copy, a gain or a bias. default_parameter_role decides by shape and
// layer for models without a rule of their own.
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
    if (role == ParameterRole::Hidden) {
      EXPECT_TRUE(matrix) << item.key();
    }
    if (role == ParameterRole::Gain || role == ParameterRole::Bias) {
      EXPECT_FALSE(matrix) << item.key();
    }
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

// Llama: 7 matrices per block (q, k, v, o, gate, up, down), 2 RMSNorm gains per block and the
// final one, no biases; its own head weight whether or not the stage holds the embedding.
TEST(ParameterRole, ClassifiesEveryLlamaParameter) {
  GptConfig config;
  config.family = DecoderFamily::Llama;
  config.tied_head = false;
  config.layers = 3;
  config.d_model = 8;
  config.heads = 2;
  config.kv_heads = 1;
  config.seq_len = 4;
  GptStack whole(config, 1, 0, config.layer_count());
  auto roles = roles_of(whole);
  EXPECT_EQ(roles[ParameterRole::Hidden], 7 * 3);
  EXPECT_EQ(roles[ParameterRole::Embedding], 1);
  EXPECT_EQ(roles[ParameterRole::Head], 1);
  EXPECT_EQ(roles[ParameterRole::Gain], 2 * 3 + 1);
  EXPECT_EQ(roles[ParameterRole::Bias], 0);
}

TEST(ParameterRole, RefusesNamesTheModelDoesNotRegister) {
  EXPECT_THROW(parameter_role("layer1.mystery.weight"), std::invalid_argument);
  EXPECT_THROW(parameter_role("qkv.weight"), std::invalid_argument);
}

// Layers 0..3: a matrix or kernel in layer 0 embeds, in layer 3 is the head, elsewhere hidden;
// fewer than 2 dims: a bias by name, else a gain, in any layer.
TEST(DefaultParameterRole, DecidesByShapeAndLayer) {
  using R = ParameterRole;
  const auto role = [](const std::string& name, std::vector<int64_t> shape) {
    return default_parameter_role(name, shape, 4);
  };
  EXPECT_EQ(role("layer0.weight", {16, 8}), R::Embedding);
  EXPECT_EQ(role("layer0.conv.weight", {4, 1, 3, 3}), R::Embedding);
  EXPECT_EQ(role("layer1.fc1.weight", {16, 16}), R::Hidden);
  EXPECT_EQ(role("layer2.conv.weight", {8, 4, 3, 3}), R::Hidden);
  EXPECT_EQ(role("layer3.weight", {4, 16}), R::Head);
  EXPECT_EQ(role("layer10.weight", {4, 16}), R::Hidden);  // not layer 1's or 0's
  EXPECT_EQ(role("layer3.bias", {4}), R::Bias);
  EXPECT_EQ(role("layer0.bn.bias", {4}), R::Bias);
  EXPECT_EQ(role("layer1.norm.weight", {16}), R::Gain);
  EXPECT_EQ(role("layer2.scale", {}), R::Gain);
  // Without the "layer<i>." prefix a matrix counts as inside the network.
  EXPECT_EQ(role("encoder.weight", {16, 16}), R::Hidden);
  EXPECT_EQ(role("layerx.weight", {16, 16}), R::Hidden);
}

}  // namespace
}  // namespace pipetrain
