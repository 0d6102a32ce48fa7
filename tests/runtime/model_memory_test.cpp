// The planner's memory model of a layer (Model::layer_work's stashed and workspace values, in
// runtime::model_plan_costs) against the counting allocator: what a stage of one GPT layer keeps
// between its forward and its backward, and its high-water mark over both, measured.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "layer_under_test.h"
#include "runtime/split_backward.h"
#include "stage_memory.h"
#include "train/optim.h"

namespace pipetrain::runtime {
namespace {

class GptLayerMemory : public ::testing::TestWithParam<LayerCase> {};

TEST_P(GptLayerMemory, StashAndPeakMatchTheCountingAllocator) {
  CountingAllocator::install();
  // One compute thread: the CPU flash attention keeps a scratch buffer per thread (bfloat16 at
  // T = 64 on 2 threads: 17 KB more on an AMD EPYC than on a Xeon), which the model leaves out;
  // the test must give the same answer on any machine.
  torch::set_num_threads(1);
  const WithoutOneDnn own_products;  // stage_memory.h
  const LayerUnderTest t(GetParam());
  const MeasuredStageMemory measured = measure_stage_memory(*t.stage, t.input, t.tokens, t.last);

  const auto predicted = t.predicted();
  const double predicted_peak = predicted.activation_bytes + predicted.workspace_bytes;
  EXPECT_NEAR(measured.stashed, predicted.activation_bytes, 0.01 * predicted.activation_bytes);
  EXPECT_NEAR(measured.peak, predicted_peak, 0.01 * predicted_peak);
}

// Zero-bubble's split backward: the output gradients its B pass records for the W pass (held
// until W runs), as runtime::SplitBackward holds them, against the costs' weight_pass_bytes.
TEST_P(GptLayerMemory, WeightPassHoldsWhatThePlannerCounts) {
  torch::set_num_threads(1);
  const LayerUnderTest t(GetParam());
  torch::Tensor root = t.stage->forward(t.input);
  if (t.last) root = t.stage->loss(root, t.tokens);
  SplitBackward pass({root}, {t.last ? torch::ones_like(root) : torch::randn_like(root)}, t.input,
                     t.stage->parameters());
  const double measured = double(pass.held_gradient_bytes());
  // (Chunked cross-entropy's B also records one scalar: 4 bytes.)
  EXPECT_NEAR(measured, t.predicted().weight_pass_bytes, 4.0);
}

// Zero-bubble's split backward once the weights hold gradients (every W of an iteration but a
// stage's first makes temporaries beside the accumulated ones): each pass's high-water mark
// above its start against the costs' input_pass_peak_bytes and weight_workspace_bytes. The
// embedding starts the model: its B has nothing to do and its W is a whole backward, whose
// workspace the peak above measures, so its costs leave both unknown (< 0).
TEST_P(GptLayerMemory, SplitBackwardPeaksMatchTheCountingAllocator) {
  CountingAllocator::install();
  torch::set_num_threads(1);
  const WithoutOneDnn own_products;
  const LayerUnderTest t(GetParam());
  const auto predicted = t.predicted();
  if (t.layer == 0) {
    EXPECT_LT(predicted.input_pass_peak_bytes, 0);
    EXPECT_LT(predicted.weight_workspace_bytes, 0);
    return;
  }
  const MeasuredSplitBackward measured = measure_split_backward(*t.stage, t.input, t.tokens, t.last);
  // (The losses' scalars and per-token values there are not counted: up to 0.2%.) In bfloat16
  // at T >= 192, ATen's CPU flash attention's backward takes a float32 scratch of 64 x T values
  // (the models leave kernels' scratch out), which at d_model 64 peaks B above the model.
  const auto& model = t.config.model;
  const bool attention_scratch = model.dtype == "bfloat16" && model.seq_len >= 192 && !t.last;
  const double scratch = attention_scratch ? 64.0 * double(model.seq_len) * 4 : 0;
  EXPECT_NEAR(measured.input_pass, predicted.input_pass_peak_bytes,
              0.01 * predicted.input_pass_peak_bytes + scratch);
  EXPECT_NEAR(measured.weight_pass, predicted.weight_workspace_bytes,
              0.01 * predicted.weight_workspace_bytes + 16);
}

// Llama's layers at the same two shapes: RMSNorm, rotary positions, grouped-query attention,
// SwiGLU, its own head; in float32 and, with RMSNorm's float32 ops under autocast, bfloat16.
INSTANTIATE_TEST_SUITE_P(Llama, GptLayerMemory,
                         ::testing::Values(llama(LayerCase{"embedding", 0, 0, 128, 512}),
                                           llama(LayerCase{"block", 1, 0, 128, 512}),
                                           llama(LayerCase{"head_full_logits", 3, 0, 128, 512}),
                                           llama(LayerCase{"head_chunked", 3, 64, 128, 512}),
                                           llama(LayerCase{"long_block", 1, 0, 256, 1024}),
                                           llama(LayerCase{"long_head_full_logits", 3, 0, 256, 1024}),
                                           llama(LayerCase{"long_head_chunked", 3, 32, 256, 1024}),
                                           llama(LayerCase{"block_d128", 1, 0, 128, 512, "float32", 128}),
                                           llama(LayerCase{"weight_gradient_head_full_logits", 3, 0, 16, 4096, "float32", 128}),
                                           llama(LayerCase{"bfloat16_weight_gradient_head_full_logits", 3, 0, 16, 4096, "bfloat16", 128}),
                                           // few tokens: down's weight gradient peaks (its
                                           // float32 copy under mixed precision)
                                           llama(LayerCase{"block_d256_t8", 1, 0, 8, 512, "float32", 256}),
                                           llama(LayerCase{"bfloat16_block", 1, 0, 128, 512, "bfloat16"}),
                                           llama(LayerCase{"bfloat16_block_ffn320", 1, 0, 128, 512, "bfloat16", 64, "llama", 320}),
                                           llama(LayerCase{"bfloat16_block_t32_ffn512", 1, 0, 32, 512, "bfloat16", 64, "llama", 512}),
                                           llama(LayerCase{"bfloat16_block_d256_t8", 1, 0, 8, 512, "bfloat16", 256}),
                                           llama(LayerCase{"bfloat16_block_d256_t128", 1, 0, 128, 512, "bfloat16", 256}),
                                           llama(LayerCase{"bfloat16_padded_head_full_logits", 3, 0, 64, 4100, "bfloat16"}),
                                           llama(LayerCase{"bfloat16_head_chunked", 3, 32, 64, 4100, "bfloat16"})),
                         [](const auto& info) { return info.param.name; });

INSTANTIATE_TEST_SUITE_P(Gpt, GptLayerMemory,
                         ::testing::Values(LayerCase{"embedding", 0, 0, 128, 512},
                                           LayerCase{"block", 1, 0, 128, 512},
                                           LayerCase{"head_full_logits", 3, 0, 128, 512},
                                           LayerCase{"head_chunked", 3, 64, 128, 512},
                                           LayerCase{"long_embedding", 0, 0, 256, 1024},
                                           LayerCase{"long_block", 1, 0, 256, 1024},
                                           LayerCase{"long_head_full_logits", 3, 0, 256, 1024},
                                           LayerCase{"long_head_chunked", 3, 32, 256, 1024},
                                           // a chunk's logits outweigh the head's gradients:
                                           // the forward's peak
                                           LayerCase{"wide_vocabulary_head_chunked", 3, 256, 128, 4096},
                                           LayerCase{"bfloat16_embedding", 0, 0, 128, 512, "bfloat16"},
                                           LayerCase{"bfloat16_block", 1, 0, 128, 512, "bfloat16"},
                                           LayerCase{"bfloat16_long_block", 1, 0, 256, 1024, "bfloat16"},
                                           LayerCase{"bfloat16_head_full_logits", 3, 0, 128, 512, "bfloat16"},
                                           LayerCase{"bfloat16_long_head_full_logits", 3, 0, 256, 1024, "bfloat16"},
                                           // a vocabulary padded to 64 columns (aligned_head_rows)
                                           LayerCase{"bfloat16_padded_head_full_logits", 3, 0, 64, 4100, "bfloat16"},
                                           LayerCase{"bfloat16_head_chunked", 3, 64, 128, 512, "bfloat16"},
                                           LayerCase{"bfloat16_long_head_chunked", 3, 32, 256, 1024, "bfloat16"},
                                           LayerCase{"bfloat16_long_embedding", 0, 0, 256, 1024, "bfloat16"},
                                           LayerCase{"bfloat16_block_t64", 1, 0, 64, 512, "bfloat16"},
                                           LayerCase{"bfloat16_block_d128", 1, 0, 128, 512, "bfloat16", 128},
                                           LayerCase{"bfloat16_block_d256_t64", 1, 0, 64, 512, "bfloat16", 256},
                                           // the MLP's start peaks when D^2 outweighs N D
                                           LayerCase{"bfloat16_block_d256_t32", 1, 0, 32, 512, "bfloat16", 256},
                                           LayerCase{"bfloat16_block_d128_t16", 1, 0, 16, 512, "bfloat16", 128},
                                           // the head weight's gradient, a temporary while the
                                           // accumulated one exists, outweighs the logits'
                                           // blocks (GPT-2 medium at context 256)
                                           LayerCase{"weight_gradient_head_full_logits", 3, 0, 16, 4096, "float32", 128},
                                           LayerCase{"bfloat16_weight_gradient_head_full_logits", 3, 0, 16, 4096, "bfloat16", 128},
                                           // and padded to 64 rows (model/gpt.cpp's
                                           // PaddedRowsCopy: once R D + V D more)
                                           LayerCase{"bfloat16_padded_weight_gradient_head_full_logits", 3, 0, 16, 4100, "bfloat16", 128},
                                           // few tokens: W's peak is an MLP weight gradient's
                                           // float32 copy
                                           LayerCase{"bfloat16_block_d256_t4", 1, 0, 4, 512, "bfloat16", 256},
                                           LayerCase{"bfloat16_block_d256_t8_ffn512", 1, 0, 8, 512, "bfloat16", 256, "gpt", 512},
                                           LayerCase{"block_d256_t16", 1, 0, 16, 512, "float32", 256}),
                         [](const auto& info) { return info.param.name; });

struct UpdateCase {
  std::string name, optimizer, dtype;
};

void PrintTo(const UpdateCase& c, std::ostream* out) { *out << c.name; }

class GptUpdateMemory : public ::testing::TestWithParam<UpdateCase> {};

// The update's temporaries on the stage holding the token embedding (the largest parameter):
// the global norm's (train/optim.cpp squared_grad_norm), then the optimizer step's, one after
// the other, against the costs' optimizer_workspace_bytes.
TEST_P(GptUpdateMemory, NormAndStepTemporariesMatchTheCountingAllocator) {
  CountingAllocator& allocator = CountingAllocator::install();
  Config config;
  config.model.layers = 2;
  config.model.d_model = 64;
  config.model.heads = 4;
  config.model.seq_len = 32;
  config.model.vocab_size = 2048;
  config.model.dtype = GetParam().dtype;
  config.train.optimizer = GetParam().optimizer;
  const auto model = make_model(config);
  auto stage = model->make_stage(0, 1);
  torch::manual_seed(7);
  const auto tokens = torch::randint(0, config.model.vocab_size, {2, config.model.seq_len});
  const auto params = stage->parameters();
  const auto optimizer = make_optimizer(params, config.train);
  for (int round = 0; round < 2; ++round) {  // the first step makes the optimizer's state
    optimizer->zero_grad();
    const auto output = stage->forward(tokens);
    output.backward(torch::ones_like(output));
    if (round == 1) break;
    optimizer->step();
  }
  const int64_t before = allocator.live_bytes();
  allocator.reset_peak();
  squared_grad_norm(params);
  optimizer->step();
  const double measured = double(allocator.peak_bytes() - before);

  const auto costs = model_plan_costs(*model, 2, model_cost_options(config));
  const double predicted = costs.at(0).optimizer_workspace_bytes;
  // (float64 gradients need no copy for their norm: then only the norms themselves, 8 bytes a
  // gradient, are made; the model counts tensors of the largest parameter's size.)
  EXPECT_NEAR(measured, predicted, 0.01 * predicted + 8.0 * double(params.size()) + 64);
}

INSTANTIATE_TEST_SUITE_P(Gpt, GptUpdateMemory,
                         ::testing::Values(UpdateCase{"adamw_float32", "adamw", "float32"},
                                           UpdateCase{"adamw_float64", "adamw", "float64"},
                                           UpdateCase{"adam_float32", "adam", "float32"},
                                           UpdateCase{"sgd_float32", "sgd", "float32"},
                                           UpdateCase{"sgd_float64", "sgd", "float64"}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pipetrain::runtime
