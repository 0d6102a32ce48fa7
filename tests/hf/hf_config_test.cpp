// config.json <-> model fields and the tensor-name map, torch-free: what transformers writes for
// GPT-2 and Llama (transformers 5's rope_parameters and the older rope_theta/rope_scaling), the
// features refused by name, and that an export's config.json reads back as the same model.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "core/error.h"
#include "hf/hf_config.h"
#include "hf/hf_names.h"
#include "../file_test_helpers.h"

namespace pipetrain::hf {
namespace {

using Json = nlohmann::json;

std::map<std::string, std::string> fields_of(const Json& config) {
  std::map<std::string, std::string> fields;
  for (const auto& [key, value] : model_fields_of(config, "config.json")) fields[key] = value;
  return fields;
}

Json gpt2_json() {
  return {{"model_type", "gpt2"}, {"vocab_size", 50257}, {"n_embd", 768}, {"n_head", 12},
          {"n_layer", 12}, {"n_positions", 1024}, {"n_inner", nullptr},
          {"activation_function", "gelu_new"}, {"layer_norm_epsilon", 1e-5}};
}

Json llama_json() {
  return {{"model_type", "llama"}, {"vocab_size", 128256}, {"hidden_size", 4096},
          {"num_attention_heads", 32}, {"num_key_value_heads", 8}, {"num_hidden_layers", 32},
          {"intermediate_size", 14336}, {"rms_norm_eps", 1e-5}, {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"rope_parameters", {{"rope_type", "llama3"}, {"rope_theta", 500000.0}, {"factor", 8.0},
                               {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                               {"original_max_position_embeddings", 8192}}}};
}

TEST(HfConfig, Gpt2FieldsAreItsShapeWithTheTanhGeluAndATiedHead) {
  const auto fields = fields_of(gpt2_json());
  EXPECT_EQ(fields.at("model.kind"), "gpt");
  EXPECT_EQ(fields.at("model.d_model"), "768");
  EXPECT_EQ(fields.at("model.layers"), "12");
  EXPECT_EQ(fields.at("model.positions"), "1024");
  EXPECT_EQ(fields.at("model.ffn_hidden"), "3072");  // n_inner null: 4 x n_embd
  EXPECT_EQ(fields.at("model.activation"), "gelu_tanh");
  EXPECT_EQ(fields.at("model.head"), "tied");
}

TEST(HfConfig, Llama31FieldsCarryGroupedQueryAttentionAndItsRotaryScaling) {
  const auto fields = fields_of(llama_json());
  EXPECT_EQ(fields.at("model.kind"), "llama");
  EXPECT_EQ(fields.at("model.kv_heads"), "8");
  EXPECT_EQ(fields.at("model.ffn_hidden"), "14336");
  EXPECT_EQ(fields.at("model.rope_theta"), "500000");
  EXPECT_EQ(fields.at("model.rope_scaling"), "llama3:8,1,4,8192");
  EXPECT_EQ(fields.at("model.head"), "untied");
}

TEST(HfConfig, OlderLlamaConfigsWithTopLevelRopeThetaAndRopeScalingRead) {
  Json config = llama_json();
  config.erase("rope_parameters");
  config["rope_theta"] = 10000.0;
  config["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  const auto fields = fields_of(config);
  EXPECT_EQ(fields.at("model.rope_theta"), "10000");
  EXPECT_EQ(fields.at("model.rope_scaling"), "linear:2");
}

TEST(HfConfig, WhatPipetrainDoesNotComputeIsRefusedByName) {
  const std::vector<std::pair<Json, std::string>> cases = {
      {[] { Json c = llama_json(); c["model_type"] = "mistral"; return c; }(), "model_type 'mistral'"},
      {[] { Json c = llama_json(); c["attention_bias"] = true; return c; }(), "attention_bias"},
      {[] { Json c = llama_json(); c["hidden_act"] = "gelu"; return c; }(), "hidden_act 'gelu'"},
      {[] { Json c = llama_json(); c["head_dim"] = 64; return c; }(), "head_dim"},
      {[] { Json c = llama_json(); c["rope_parameters"]["rope_type"] = "yarn"; return c; }(), "'yarn'"},
      {[] { Json c = gpt2_json(); c["activation_function"] = "relu"; return c; }(), "'relu'"},
      {[] { Json c = gpt2_json(); c["scale_attn_by_inverse_layer_idx"] = true; return c; }(),
       "scale_attn_by_inverse_layer_idx"},
      {[] { Json c = gpt2_json(); c["n_layer"] = "12"; return c; }(), "'n_layer' must be a positive integer"},
  };
  for (const auto& [config, fragment] : cases) {
    const std::string message = test::user_error_of([&] { model_fields_of(config, "config.json"); });
    EXPECT_NE(message.find(fragment), std::string::npos) << fragment << ": " << message;
  }
}

TEST(HfConfig, AnExportedConfigReadsBackAsTheSameModel) {
  for (const Json& original : {gpt2_json(), llama_json()}) {
    Config config;
    for (const auto& [key, value] : model_fields_of(original, "config.json")) {
      set_field_from_string(config, key, value);
    }
    validate(config);
    EXPECT_EQ(fields_of(config_json_of(config.model, "float32")), fields_of(original)) << original.dump();
  }
}

TEST(HfConfig, OnlyTheDecodersHaveAHuggingFaceForm) {
  ModelConfig cnn;
  cnn.kind = "cnn";
  EXPECT_NE(test::user_error_of([&] { config_json_of(cnn, "float32"); }).find("model.kind 'cnn' has no Hugging Face form"),
            std::string::npos);
}

TEST(HfConfig, InitFromSetsTheShapeAndRefusesAClashingFieldGivenBesideIt) {
  const auto dir = test::fresh_folder("pipetrain_hf_config");
  std::ofstream(dir / "config.json") << llama_json().dump();
  Config config;
  config.model.init_from = dir.string();
  apply_init_from(config, {});
  EXPECT_EQ(config.model.kind, "llama");
  EXPECT_EQ(config.model.layers, 32);
  EXPECT_EQ(config.model.heads, 32);

  Config clashing;
  clashing.model.init_from = dir.string();
  clashing.model.layers = 8;
  const std::string message = test::user_error_of([&] { apply_init_from(clashing, {"model.layers"}); });
  EXPECT_NE(message.find("model.layers = 8 is given beside model.init_from"), std::string::npos) << message;
  EXPECT_NE(message.find("says 32"), std::string::npos) << message;

  std::ofstream(dir / "config.json") << "{not json";
  EXPECT_NE(test::user_error_of([&] { apply_init_from(config, {}); }).find("not valid JSON"), std::string::npos);
  std::filesystem::remove(dir / "config.json");
  EXPECT_NE(test::user_error_of([&] { apply_init_from(config, {}); }).find("holds no config.json"), std::string::npos);
  config.model.init_from = (dir / "missing").string();
  EXPECT_NE(test::user_error_of([&] { apply_init_from(config, {}); }).find("is not a folder"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A model trained from scratch names no special tokens (null, not GPT2Config's 50256, past a
// byte model's vocabulary); one started from a checkpoint keeps its tokenizer's ids and (Llama)
// the longer of its made-for context and the trained one.
TEST(HfConfig, AnExportKeepsTheSpecialTokensOfTheCheckpointItStartedFrom) {
  Config scratch;
  const Json fresh = config_json_of(scratch.model, "float32");
  EXPECT_TRUE(fresh.at("bos_token_id").is_null());
  EXPECT_TRUE(fresh.at("eos_token_id").is_null());
  EXPECT_FALSE(fresh.contains("pad_token_id"));

  const auto dir = test::fresh_folder("pipetrain_hf_tokens");
  Json started = llama_json();
  started["bos_token_id"] = 128000;
  started["eos_token_id"] = Json::array({128001, 128009});
  started["max_position_embeddings"] = 131072;
  std::ofstream(dir / "config.json") << started.dump();
  Config config;
  config.model.init_from = dir.string();
  apply_init_from(config, {});
  const Json exported = config_json_of(config.model, "bfloat16", dir.string());
  EXPECT_EQ(exported.at("bos_token_id"), 128000);
  EXPECT_EQ(exported.at("eos_token_id"), Json::array({128001, 128009}));
  EXPECT_FALSE(exported.contains("pad_token_id"));
  EXPECT_EQ(exported.at("max_position_embeddings"), 131072);
  started["max_position_embeddings"] = 64;  // shorter than the 128 tokens it was trained at
  std::ofstream(dir / "config.json") << started.dump();
  config.model.seq_len = 128;
  EXPECT_EQ(config_json_of(config.model, "bfloat16", dir.string()).at("max_position_embeddings"), 128);
  // The checkpoint gone since: no ids rather than a failed export.
  std::filesystem::remove(dir / "config.json");
  EXPECT_TRUE(config_json_of(config.model, "bfloat16", dir.string()).at("eos_token_id").is_null());
  std::filesystem::remove_all(dir);
}

TEST(HfNames, Gpt2ConvWeightsAreTransposedAndATiedHeadIsWrittenOnce) {
  ModelConfig model;
  model.kind = "gpt";
  model.layers = 2;
  const auto block = layer_tensor_names(model, 1);
  ASSERT_EQ(block.size(), 12u);
  EXPECT_EQ(block[2].pipetrain, "layer1.qkv.weight");
  EXPECT_EQ(block[2].hf, "transformer.h.0.attn.c_attn.weight");
  EXPECT_TRUE(block[2].transposed);
  EXPECT_FALSE(block[3].transposed);  // its bias
  const auto all = model_tensor_names(model);
  EXPECT_EQ(all.size(), 2u + 2 * 12 + 2);  // wte, wpe, the blocks, ln_f (weight, bias)
  for (const auto& name : all) EXPECT_NE(name.hf, "lm_head.weight");
  model.head = "untied";
  EXPECT_EQ(model_tensor_names(model).back().hf, "lm_head.weight");
}

TEST(HfNames, LlamaLayersMapToTheirModulesAndAnUntiedHeadToLmHead) {
  ModelConfig model;
  model.kind = "llama";
  model.layers = 3;
  const auto block = layer_tensor_names(model, 3);
  ASSERT_EQ(block.size(), 9u);
  EXPECT_EQ(block[1].hf, "model.layers.2.self_attn.q_proj.weight");
  for (const auto& name : block) EXPECT_FALSE(name.transposed);
  const auto head = layer_tensor_names(model, 4);
  EXPECT_EQ(head.back().pipetrain, "layer4.head_weight");
  EXPECT_EQ(head.back().hf, "lm_head.weight");
  model.head = "tied";
  EXPECT_EQ(layer_tensor_names(model, 4).back().hf, "model.embed_tokens.weight");
}

}  // namespace
}  // namespace pipetrain::hf
