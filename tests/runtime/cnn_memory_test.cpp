// The CNN's memory model (CnnModel::layer_work's stashed and workspace values) against the
// counting allocator: what a stage of one layer keeps between its forward and its backward,
// and its high-water mark over both.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "counted_passes.h"
#include "model/registry.h"
#include "runtime/model_costs.h"
#include "stage_memory.h"

namespace pipetrain::runtime {
namespace {

// The Fashion-MNIST example's shape (stem width 12, three blocks), 2 images a microbatch.
Config cnn_config() {
  Config config;
  config.model.kind = "cnn";
  config.model.layers = 3;
  config.model.d_model = 12;
  config.data.format = "fashion-mnist";
  return config;
}

struct CnnLayerCase {
  std::string name;
  int64_t layer;
};

void PrintTo(const CnnLayerCase& c, std::ostream* out) { *out << c.name; }

class CnnLayerMemory : public ::testing::TestWithParam<CnnLayerCase> {};

// One layer of the example's CNN as a stage in training mode, and its input (2 images, or a
// random activation that wants its gradient).
struct CnnLayerUnderTest {
  explicit CnnLayerUnderTest(int64_t layer) : layer(layer) {
    stage->train();
    torch::manual_seed(7);
    const TensorSpec received = layer == 0 ? model->input_spec(rows) : model->boundary_spec(layer, rows);
    input = torch::randn(received.shape).to(received.dtype).requires_grad_(layer > 0);
  }
  static constexpr int64_t rows = 2;
  int64_t layer;
  Config config = cnn_config();
  std::shared_ptr<const Model> model = make_model(config);
  std::shared_ptr<StageModule> stage = model->make_stage(layer, layer + 1);
  torch::Tensor input;
};

TEST_P(CnnLayerMemory, StashAndPeakMatchTheCountingAllocator) {
  CountingAllocator::install();
  torch::set_num_threads(1);
  const CnnLayerUnderTest t(GetParam().layer);
  const int64_t layer = t.layer, rows = t.rows;
  const bool last = layer == t.model->layer_count() - 1;
  const torch::Tensor labels = torch::randint(0, 10, {rows});
  const MeasuredStageMemory measured = measure_stage_memory(*t.stage, t.input, labels, last);

  const auto predicted = model_plan_costs(*t.model, rows, model_cost_options(t.config)).at(size_t(layer));
  const double predicted_peak = predicted.activation_bytes + predicted.workspace_bytes;
  // (256 bytes: the head's loss scalar and BatchNorm's saved statistics, which the model leaves out.)
  EXPECT_NEAR(measured.stashed, predicted.activation_bytes, std::max(0.01 * predicted.activation_bytes, 256.0))
      << "measured stash " << measured.stashed << " B, peak " << measured.peak << " B";
  // The peak holds oneDNN's convolution scratch (real runs use oneDNN), whose size follows the
  // CPU's instructions: measured 2-3% from the model here, allowed 15%.
  EXPECT_NEAR(measured.peak, predicted_peak, 0.15 * predicted_peak)
      << "measured stash " << measured.stashed << " B, peak " << measured.peak << " B";
}

// Each layer's operators (a fixed cost each in plans: plan::ClusterSpec::operator_s), exactly:
// counted_work's over the layer's forward and a backward from its output.
TEST_P(CnnLayerMemory, OperatorsAreTheCountedOnes) {
  const CnnLayerUnderTest t(GetParam().layer);
  const auto [forward, backward] = counted_passes(*t.stage, t.input);
  const LayerWork work = t.model->layer_work(t.layer, t.rows);
  EXPECT_EQ(work.forward_operators, forward.operators);
  EXPECT_EQ(work.backward_operators, backward.operators);
}

INSTANTIATE_TEST_SUITE_P(Cnn, CnnLayerMemory,
                         ::testing::Values(CnnLayerCase{"stem", 0}, CnnLayerCase{"block0_same_shape", 1},
                                           CnnLayerCase{"block1_projected", 2}, CnnLayerCase{"head", 4}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace pipetrain::runtime
