// The planner's memory model of the transducer's layers (TransducerModel::layer_work, through
// runtime::model_plan_costs) against the counting allocator: what a stage of one layer keeps
// between its forward and its backward, and its high-water mark over both, for the subsampling
// front end, an encoder block and the joint layer with each loss method, at three shapes and a
// few more: a convolution width that is not a multiple of 16, one row and eight (the predictor's
// oneDNN LSTM copies its input only for several), float64 (libtorch's own LSTM), bfloat16.
#include <gtest/gtest.h>

#include <optional>

#include <torch/torch.h>

#include "model/registry.h"
#include "runtime/model_costs.h"
#include "stage_memory.h"

namespace pipetrain::runtime {
namespace {

struct TransducerLayerCase {
  std::string name;
  int64_t layer;  // in a 1-block transducer: 0 subsample, 1 encoder block, 2 joint
  std::string loss;
  int64_t rows, frames, labels, d_model;
  std::string dtype = "float32";  // bfloat16: mixed precision's bytes (runtime/model_costs.h)
  // false: only the kept bytes are modelled (a CPU's oneDNN scratch in bfloat16, docs/speech.md)
  bool peak_modelled = true;
};

void PrintTo(const TransducerLayerCase& c, std::ostream* out) { *out << c.name; }

class TransducerLayerMemory : public ::testing::TestWithParam<TransducerLayerCase> {};

// Every utterance at full length: the planner's bound is then the measured value.
TEST_P(TransducerLayerMemory, StashAndPeakMatchTheCountingAllocator) {
  CountingAllocator::install();
  const auto& param = GetParam();
  Config config;
  config.model.kind = "transducer";
  config.model.layers = 1;
  config.model.d_model = param.d_model;
  config.model.heads = 4;
  config.model.seq_len = param.frames;
  config.model.max_labels = param.labels;
  config.model.transducer_loss = param.loss;
  config.model.dtype = param.dtype;
  const auto model = make_model(config);
  auto stage = model->make_stage(param.layer, param.layer + 1);
  torch::manual_seed(7);
  auto labels = torch::randint(1, 29, {param.rows, 1 + param.labels}, torch::kInt64);
  labels.select(1, 0).fill_(param.labels);
  const auto spec = param.layer == 0 ? model->input_spec(param.rows)
                                     : model->boundary_spec(param.layer, param.rows);
  auto input = torch::randn(spec.shape, torch::dtype(spec.dtype));
  const int64_t width = spec.shape[2] - 1;
  input.select(2, width).fill_(1.0);  // every utterance full length
  if (param.layer > 0) input.requires_grad_(true);
  const bool last = param.layer == model->layer_count() - 1;
  // The encoder block's products are ATen's own (stage_memory.h); the front end's convolutions
  // and the predictor's LSTM stay oneDNN's, as in a CPU run and in the model.
  std::optional<WithoutOneDnn> own_products;
  if (param.layer == 1) own_products.emplace();
  const MeasuredStageMemory measured = measure_stage_memory(*stage, input, labels, last);

  const auto costs = model_plan_costs(*model, param.rows, model_cost_options(config));
  const auto& predicted = costs.at(size_t(param.layer));
  const double predicted_peak = predicted.activation_bytes + predicted.workspace_bytes;
  EXPECT_NEAR(measured.stashed, predicted.activation_bytes, 0.01 * predicted.activation_bytes);
  if (param.peak_modelled) {
    EXPECT_NEAR(measured.peak, predicted_peak, 0.01 * predicted_peak);
  }
}

// short: the encoder's backward peaks in its MLP; wide: in the MLP beside the first matrix's
// gradient; long (256 encoder frames): in the attention's softmax. The subsampling at three
// widths of its convolutions (16 channels, 32, and 24: not a multiple of 16). Mixed precision (bfloat16):
// the encoder where its backward peaks: at the MLP's start (wide), in the MLP (mlp), in the
// softmax (softmax, long); the front end and the joint layer their kept bytes only (their CPU
// peaks hold oneDNN's float32 scratch, not modelled).
INSTANTIATE_TEST_SUITE_P(
    Transducer, TransducerLayerMemory,
    ::testing::Values(
        TransducerLayerCase{"short_subsample", 0, "sample-wise", 2, 128, 20, 64},
        TransducerLayerCase{"short_encoder", 1, "sample-wise", 2, 128, 20, 64},
        TransducerLayerCase{"short_joint_sample_wise", 2, "sample-wise", 2, 128, 20, 64},
        TransducerLayerCase{"short_joint_batched", 2, "batched", 2, 128, 20, 64},
        TransducerLayerCase{"wide_subsample", 0, "sample-wise", 2, 128, 30, 128},
        TransducerLayerCase{"wide_encoder", 1, "sample-wise", 2, 128, 30, 128},
        TransducerLayerCase{"wide_joint_sample_wise", 2, "sample-wise", 2, 128, 30, 128},
        TransducerLayerCase{"wide_joint_batched", 2, "batched", 2, 128, 30, 128},
        TransducerLayerCase{"long_subsample", 0, "sample-wise", 3, 1024, 40, 64},
        TransducerLayerCase{"long_encoder", 1, "sample-wise", 3, 1024, 40, 64},
        TransducerLayerCase{"long_joint_sample_wise", 2, "sample-wise", 3, 1024, 40, 64},
        TransducerLayerCase{"long_joint_batched", 2, "batched", 3, 1024, 40, 64},
        TransducerLayerCase{"odd_width_subsample", 0, "sample-wise", 2, 256, 20, 96},
        TransducerLayerCase{"one_row_joint_sample_wise", 2, "sample-wise", 1, 128, 20, 64},
        TransducerLayerCase{"many_rows_joint_batched", 2, "batched", 8, 128, 12, 64},
        TransducerLayerCase{"float64_joint_sample_wise", 2, "sample-wise", 2, 128, 20, 64, "float64"},
        TransducerLayerCase{"bfloat16_wide_encoder", 1, "sample-wise", 2, 128, 30, 128, "bfloat16"},
        TransducerLayerCase{"bfloat16_mlp_encoder", 1, "sample-wise", 4, 256, 20, 64, "bfloat16"},
        TransducerLayerCase{"bfloat16_softmax_encoder", 1, "sample-wise", 2, 512, 20, 64, "bfloat16"},
        TransducerLayerCase{"bfloat16_long_encoder", 1, "sample-wise", 3, 1024, 40, 64, "bfloat16"},
        TransducerLayerCase{"bfloat16_short_subsample", 0, "sample-wise", 2, 128, 20, 64, "bfloat16", false},
        TransducerLayerCase{"bfloat16_wide_subsample", 0, "sample-wise", 2, 128, 30, 128, "bfloat16", false},
        TransducerLayerCase{"bfloat16_short_joint_sample_wise", 2, "sample-wise", 2, 128, 20, 64, "bfloat16", false},
        TransducerLayerCase{"bfloat16_wide_joint_sample_wise", 2, "sample-wise", 2, 128, 30, 128, "bfloat16", false},
        TransducerLayerCase{"bfloat16_long_joint_sample_wise", 2, "sample-wise", 3, 1024, 40, 64, "bfloat16", false},
        TransducerLayerCase{"bfloat16_one_row_joint_sample_wise", 2, "sample-wise", 1, 128, 20, 64, "bfloat16", false},
        TransducerLayerCase{"bfloat16_short_joint_batched", 2, "batched", 2, 128, 20, 64, "bfloat16", false},
        TransducerLayerCase{"bfloat16_many_rows_joint_batched", 2, "batched", 8, 128, 12, 64, "bfloat16", false}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pipetrain::runtime
