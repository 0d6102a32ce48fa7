// The planner's memory model of a layer (Model::layer_work's stashed and workspace values, in
// runtime::model_plan_costs) against the counting allocator: what a stage of one GPT layer keeps
// between its forward and its backward, and its high-water mark over both, measured.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/registry.h"
#include "runtime/model_costs.h"
#include "stage_memory.h"

namespace pipetrain::runtime {
namespace {

struct LayerCase {
  std::string name;
  int64_t layer;  // in a 2-block GPT: 0 embedding, 1-2 blocks, 3 head
  int64_t loss_chunk_tokens;
  int64_t seq_len, vocab_size;  // two shapes: the attention outweighs the MLP in the second
};

void PrintTo(const LayerCase& c, std::ostream* out) { *out << c.name; }

class GptLayerMemory : public ::testing::TestWithParam<LayerCase> {};

TEST_P(GptLayerMemory, StashAndPeakMatchTheCountingAllocator) {
  CountingAllocator::install();
  Config config;
  config.model.layers = 2;
  config.model.d_model = 64;
  config.model.heads = 4;
  config.model.seq_len = GetParam().seq_len;
  config.model.vocab_size = GetParam().vocab_size;
  config.model.loss_chunk_tokens = GetParam().loss_chunk_tokens;
  const int64_t rows = 2, layer = GetParam().layer;
  const auto model = make_model(config);
  auto stage = model->make_stage(layer, layer + 1);
  torch::manual_seed(7);
  const bool first = layer == 0, last = layer == model->layer_count() - 1;
  const auto tokens = torch::randint(0, config.model.vocab_size, {rows, config.model.seq_len});
  const auto input = first ? tokens : torch::randn({rows, config.model.seq_len, config.model.d_model}).requires_grad_(true);
  const MeasuredStageMemory measured = measure_stage_memory(*stage, input, tokens, last);

  const auto costs = model_plan_costs(*model, rows, model_cost_options(config));
  const auto& predicted = costs.at(size_t(layer));
  const double predicted_peak = predicted.activation_bytes + predicted.workspace_bytes;
  EXPECT_NEAR(measured.stashed, predicted.activation_bytes, 0.01 * predicted.activation_bytes);
  EXPECT_NEAR(measured.peak, predicted_peak, 0.01 * predicted_peak);
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptLayerMemory,
                         ::testing::Values(LayerCase{"embedding", 0, 0, 128, 512},
                                           LayerCase{"block", 1, 0, 128, 512},
                                           LayerCase{"head_full_logits", 3, 0, 128, 512},
                                           LayerCase{"head_chunked", 3, 64, 128, 512},
                                           LayerCase{"long_embedding", 0, 0, 256, 1024},
                                           LayerCase{"long_block", 1, 0, 256, 1024},
                                           LayerCase{"long_head_full_logits", 3, 0, 256, 1024},
                                           LayerCase{"long_head_chunked", 3, 32, 256, 1024}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pipetrain::runtime
