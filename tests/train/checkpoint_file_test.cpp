// Checkpoint files streamed from the tensors' own memory are byte for byte the encoder's file
// of the same tensors (module_entries / to_entry), with the CRC32C of those bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <torch/torch.h>

#include "core/files.h"
#include "../file_test_helpers.h"
#include "io/crc32c.h"
#include "model/state_io.h"
#include "train/checkpoint.h"
#include "train/optim.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;


std::string encoded(const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  std::vector<TensorEntry> entries;
  for (const auto& [name, tensor] : tensors) entries.push_back(to_entry(name, tensor));
  return encode_safetensors(entries);
}

// Parameters, float and integer buffers (BatchNorm's statistics and batch count) and AdamW's
// moments and step counts after one update.
TEST(CheckpointFile, ModuleAndAdamWStateEqualTheEncodedEntries) {
  torch::manual_seed(3);
  torch::nn::Sequential module(torch::nn::Linear(5, 3), torch::nn::BatchNorm1d(3));
  TrainConfig train;
  train.optimizer = "adamw";
  auto optimizer = make_optimizer(module->parameters(), train);
  module->forward(torch::randn({4, 5})).square().sum().backward();
  optimizer->step();
  const fs::path dir = test::fresh_folder("pipetrain_checkpoint_file");
  const auto checksums = save_module_state(dir.string(), "model.safetensors",
                                           "optimizer.safetensors", *module, *optimizer);
  const std::string weights = read_file((dir / "model.safetensors").string());
  const std::string state = read_file((dir / "optimizer.safetensors").string());
  EXPECT_EQ(weights, encode_safetensors(module_entries(*module)));
  EXPECT_EQ(state, encoded(optimizer_state_tensors(*optimizer, *module)));
  EXPECT_EQ(checksums.at("model.safetensors"), crc32c_hex(weights));
  EXPECT_EQ(checksums.at("optimizer.safetensors"), crc32c_hex(state));
  EXPECT_EQ(checksums.size(), 2u);
  // Linear and BatchNorm weight and bias; running mean, variance and batch count (I64).
  EXPECT_EQ(module_entries(*module).size(), 7u);
  fs::remove_all(dir);
}

// Views (a transpose, an offset slice), a scalar, an empty tensor and one tensor under two
// names (a tied weight's second copy) are written as their contiguous copies would be.
TEST(CheckpointFile, ViewsScalarsEmptyAndRepeatedTensorsEqualTheEncodedEntries) {
  const auto matrix = torch::arange(12, torch::kFloat64).reshape({3, 4});
  const std::vector<std::pair<std::string, torch::Tensor>> tensors = {
      {"transposed", matrix.t()},
      {"slice", matrix.slice(1, 1, 3)},
      {"step", torch::tensor(int64_t(7))},
      {"empty", torch::zeros({0, 2}, torch::kFloat32)},
      {"tied.first", matrix},
      {"tied.second", matrix}};
  const fs::path dir = test::fresh_folder("pipetrain_checkpoint_views");
  const std::string crc = write_checkpoint_file(dir.string(), "views.safetensors", tensors);
  const std::string file = read_file((dir / "views.safetensors").string());
  EXPECT_EQ(file, encoded(tensors));
  EXPECT_EQ(crc, crc32c_hex(file));
  const auto decoded = decode_safetensors(file, "views");
  ASSERT_EQ(decoded.size(), 6u);
  for (const auto& entry : decoded) {
    if (entry.name != "transposed") continue;
    const auto* values = reinterpret_cast<const double*>(entry.bytes.data());
    EXPECT_EQ(values[1], 4.0);  // row 0 of the transpose: 0, 4, 8
    EXPECT_EQ(values[3], 1.0);  // row 1 starts at 1
  }
  fs::remove_all(dir);
}

// A stage holding only the later copy of a shared parameter (a pipeline head's copy of GPT's
// embedding) loads it and its AdamW state from the first copy's entries, as a single-process
// checkpoint stores them.
TEST(CheckpointFile, LaterCopyOfASharedParameterLoadsFromTheFirstCopysEntries) {
  torch::nn::Module head;
  auto layer = std::make_shared<torch::nn::Module>();
  layer->register_parameter("weight", torch::zeros({2, 3}, torch::kFloat64));
  head.register_module("layer3", layer);
  TrainConfig train;
  train.optimizer = "adamw";
  auto optimizer = make_optimizer(head.parameters(), train);
  const auto embedding = torch::arange(6, torch::kFloat64).reshape({2, 3});
  CheckpointTensors tensors;
  tensors.weights = {to_entry("layer0.weight", embedding), to_entry("layer1.bias", torch::ones({3}))};
  tensors.optimizer = {to_entry("layer0.weight.exp_avg", embedding * 0.5),
                       to_entry("layer0.weight.exp_avg_sq", embedding * 0.25),
                       to_entry("layer0.weight.step", torch::tensor(int64_t(9)))};
  const SharedParameter tied{{{0, "layer0.weight"}, {3, "layer3.weight"}}};
  load_module_state(tensors, "test", head, *optimizer, {tied});
  EXPECT_TRUE(torch::equal(head.named_parameters()["layer3.weight"], embedding));
  std::map<std::string, torch::Tensor> state;
  for (const auto& [name, tensor] : optimizer_state_tensors(*optimizer, head)) state[name] = tensor;
  ASSERT_EQ(state.size(), 3u);
  EXPECT_TRUE(torch::equal(state.at("layer3.weight.exp_avg"), embedding * 0.5));
  EXPECT_TRUE(torch::equal(state.at("layer3.weight.exp_avg_sq"), embedding * 0.25));
  EXPECT_EQ(state.at("layer3.weight.step").item<int64_t>(), 9);
}

// A pipeline worker reads only the checkpoint stages holding one of its layers: with stages
// [0, 2) and [2, 4), layer 3 reads the second stage's files, layers 1 and 2 both, no layer none.
TEST(CheckpointFile, ReadsOnlyTheStagesHoldingTheLayersAsked) {
  const fs::path dir = test::fresh_folder("pipetrain_checkpoint_stages");
  Config config;
  config.train.optimizer = "sgd";
  config.train.momentum = 0;  // no optimizer state: the files list none
  CheckpointInfo info;
  info.optimizer = "sgd";
  info.config_toml = to_toml(config);
  info.layers = 4;
  info.partition = {{0, 2}, {2, 4}};
  for (int stage = 0; stage < 2; ++stage) {
    const std::string weights = "stage" + std::to_string(stage) + ".safetensors";
    const std::string state = "stage" + std::to_string(stage) + ".optimizer.safetensors";
    const auto layer = [&](int i) { return "layer" + std::to_string(2 * stage + i) + ".weight"; };
    info.crc32c[weights] = write_checkpoint_file(
        dir.string(), weights, {{layer(0), torch::ones({2})}, {layer(1), torch::ones({2})}});
    info.crc32c[state] = write_checkpoint_file(dir.string(), state, {});
    info.weight_versions.push_back({weights});
    info.optimizer_files.push_back(state);
  }
  const ParameterRoles roles = [](const std::string&, const std::vector<int64_t>&) {
    return ParameterRole::Hidden;
  };
  const auto names_read = [&](const std::set<int64_t>& layers) {
    std::vector<std::string> names;
    for (const auto& entry : read_checkpoint_tensors(dir.string(), info, roles, layers).weights) {
      names.push_back(entry.name);
    }
    return names;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names_read({3}), (Names{"layer2.weight", "layer3.weight"}));
  EXPECT_EQ(names_read({1, 2}), (Names{"layer0.weight", "layer1.weight", "layer2.weight", "layer3.weight"}));
  EXPECT_EQ(names_read({}), Names{});
  EXPECT_EQ(read_checkpoint_tensors(dir.string(), info, roles).weights.size(), 4u);  // every stage
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
