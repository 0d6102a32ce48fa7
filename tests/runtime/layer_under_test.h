#pragma once
// One layer of a 2-block GPT (or Llama) of a test case's shape as a stage, its input and the
// planner's costs for it: the memory-model tests (model_memory_test.cpp) and the traffic-model
// tests (model_traffic_test.cpp) measure the same layers.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "model/registry.h"
#include "runtime/model_costs.h"

namespace pipetrain::runtime {

struct LayerCase {
  std::string name;
  int64_t layer;  // in a 2-block GPT: 0 embedding, 1-2 blocks, 3 head
  int64_t loss_chunk_tokens;
  int64_t seq_len, vocab_size;  // two shapes: the attention outweighs the MLP in the second
  std::string dtype = "float32";  // bfloat16: mixed precision's bytes (runtime/model_costs.h)
  int64_t d_model = 64;
  std::string kind = "gpt";  // llama: 4 query heads sharing 2 key/value heads, an untied head
  int64_t ffn_hidden = 0;     // the MLP's width; 0: the family's
};

inline void PrintTo(const LayerCase& c, std::ostream* out) { *out << c.name; }

inline LayerCase llama(LayerCase c) {
  c.kind = "llama";
  return c;
}

// A 2-block model of the case's shape, one layer of it as a stage, and that stage's input (2
// rows: tokens for the embedding, a random activation that wants its gradient otherwise).
struct LayerUnderTest {
  explicit LayerUnderTest(const LayerCase& c) : layer(c.layer) {
    config.model.layers = 2;
    config.model.d_model = c.d_model;
    config.model.heads = 4;
    config.model.seq_len = c.seq_len;
    config.model.vocab_size = c.vocab_size;
    config.model.loss_chunk_tokens = c.loss_chunk_tokens;
    config.model.dtype = c.dtype;
    config.model.kind = c.kind;
    if (c.kind == "llama") config.model.kv_heads = 2;
    if (c.ffn_hidden > 0) config.model.ffn_hidden = c.ffn_hidden;
    model = make_model(config);
    stage = model->make_stage(c.layer, c.layer + 1);
    torch::manual_seed(7);
    last = c.layer == model->layer_count() - 1;
    tokens = torch::randint(0, config.model.vocab_size, {rows, config.model.seq_len});
    const TensorSpec received = model->boundary_spec(std::max<int64_t>(c.layer, 1), rows);
    input = c.layer == 0 ? tokens : torch::randn(received.shape).to(received.dtype).requires_grad_(true);
  }
  plan::LayerCost predicted() const {
    return model_plan_costs(*model, rows, model_cost_options(config)).at(size_t(layer));
  }

  static constexpr int64_t rows = 2;
  int64_t layer;
  Config config;
  std::shared_ptr<const Model> model;
  std::shared_ptr<StageModule> stage;
  bool last = false;
  torch::Tensor tokens, input;
};

}  // namespace pipetrain::runtime
