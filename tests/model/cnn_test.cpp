// The CNN behind the model interface (model/cnn_model.h) and Fashion-MNIST batches
// (model/image_batch.h): shapes chain as the specs say, stages start from the whole model's
// weights, analytic work in closed form, parameter roles, BatchNorm's training and eval modes,
// and batches that are a pure function of (seed, step).
#include <gtest/gtest.h>

#include <map>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "../tensor_exactness.h"
#include "core/error.h"
#include "model/image_batch.h"
#include "model/registry.h"
#include "train/muon.h"
#include "train/optim.h"

namespace pipetrain {
namespace {

Config cnn_config() {
  Config c;
  c.model.kind = "cnn";
  c.model.layers = 4;
  c.model.d_model = 4;
  c.model.dtype = "float64";
  c.train.seed = 3;
  return c;
}

Microbatch cnn_example(const Model& model, int64_t rows) {
  auto generator = at::detail::createCPUGenerator(7);
  return model.example(rows, generator);
}

TEST(CnnModel, EachLayerProducesItsBoundarySpec) {
  const auto model = make_model(cnn_config());
  ASSERT_EQ(model->layer_count(), 6);  // stem, 4 blocks, head
  EXPECT_EQ(model->describe(), "CNN 4 residual blocks, 4 base channels");
  torch::Tensor x = cnn_example(*model, 3).inputs;
  EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{3, 1, 28, 28}));
  // Width 4 at 28x28, 8 at 14x14, then 16 at 7x7 twice; 10 logits.
  const std::vector<std::vector<int64_t>> want = {
      {3, 4, 28, 28}, {3, 4, 28, 28}, {3, 8, 14, 14}, {3, 16, 7, 7}, {3, 16, 7, 7}, {3, 10}};
  for (int64_t layer = 0; layer < model->layer_count(); ++layer) {
    x = model->make_stage(layer, layer + 1)->forward(x);
    EXPECT_EQ(x.sizes().vec(), want[size_t(layer)]) << model->layer_name(layer);
    EXPECT_EQ(x.scalar_type(), torch::kFloat64);
    if (layer + 1 < model->layer_count()) {
      EXPECT_EQ(model->boundary_spec(layer + 1, 3).shape, want[size_t(layer)]);
    }
  }
  EXPECT_EQ(model->label_spec(3).shape, std::vector<int64_t>{3});
  EXPECT_EQ(model->layer_name(0), "stem");
  EXPECT_EQ(model->layer_name(2), "block1");
  EXPECT_EQ(model->layer_name(5), "head");
}

TEST(CnnModel, StagesChainToTheWholeModelsLoss) {
  const auto model = make_model(cnn_config());
  const Microbatch batch = cnn_example(*model, 4);
  const auto whole = model->make_whole();
  const auto front = model->make_stage(0, 2), back = model->make_stage(2, 6);
  const auto want = whole->loss(whole->forward(batch.inputs), batch.labels);
  const auto got = back->loss(back->forward(front->forward(batch.inputs)), batch.labels);
  EXPECT_EQ(testing::elementwise_mismatch(got, want, 0, 0), "");
  std::set<std::string> names;
  for (const auto& stage : {front, back}) {
    for (const auto& item : stage->named_parameters()) names.insert(item.key());
  }
  EXPECT_EQ(names.size(), whole->named_parameters().size());
  // Cross-entropy of near-uniform initial logits over 10 classes.
  EXPECT_NEAR(want.item<double>(), std::log(10.0), 1.5);
}

TEST(CnnModel, LayerWorkIsTheConvolutionsInClosedForm) {
  const auto model = make_model(cnn_config());
  const double rows = 2;
  // Stem: 3x3 from 1 to 4 channels at 28x28; BatchNorm's gain and bias.
  const LayerWork stem = model->layer_work(0, 2);
  EXPECT_DOUBLE_EQ(stem.forward_flops, 2 * rows * 784 * 9 * 1 * 4);
  EXPECT_DOUBLE_EQ(stem.parameters, 9 * 4 + 2 * 4);
  EXPECT_DOUBLE_EQ(stem.output_values, rows * 4 * 784);
  // Block 1: 4 -> 8 channels at 14x14, with the strided 1x1 shortcut.
  const LayerWork block1 = model->layer_work(2, 2);
  EXPECT_DOUBLE_EQ(block1.forward_flops, 2 * rows * 196 * (9 * 4 * 8 + 9 * 8 * 8 + 4 * 8));
  EXPECT_DOUBLE_EQ(block1.parameters, 9 * 4 * 8 + 9 * 8 * 8 + 4 * 8 + 3 * 2 * 8);
  const LayerWork head = model->layer_work(5, 2);
  EXPECT_DOUBLE_EQ(head.forward_flops, 2 * rows * 16 * 10);
  EXPECT_DOUBLE_EQ(head.parameters, 16 * 10 + 10);
  // The parameters counted are the module's.
  double counted = 0;
  for (int64_t layer = 0; layer < model->layer_count(); ++layer) counted += model->layer_work(layer, 1).parameters;
  EXPECT_DOUBLE_EQ(counted, double(parameter_count(*model->make_whole())));
}

// The default rule (model/parameter_role.h) on the CNN: the residual blocks' kernels (with the
// strided blocks' 1x1 shortcuts) are Muon's matrices; the stem's kernel, the classifier,
// BatchNorm's gains and the biases are AdamW's. Muon's optimizer splits them so.
TEST(CnnModel, DefaultRolesMakeTheBlockKernelsMuonsMatrices) {
  Config config = cnn_config();
  config.train.optimizer = "muon";
  const auto model = make_model(config);
  const auto whole = model->make_whole();
  std::map<ParameterRole, std::set<std::string>> by_role;
  std::set<std::string> muon_names;
  const auto optimizer = make_optimizer(named_tensors(*whole), config.train, roles_of(*model));
  const auto& muon = dynamic_cast<const Muon&>(*optimizer);
  for (const auto& item : whole->named_parameters()) {
    by_role[model->role_of(item.key(), item.value().sizes().vec())].insert(item.key());
    if (muon.updates_with_muon(item.value())) muon_names.insert(item.key());
  }
  using R = ParameterRole;
  const std::set<std::string> hidden = {
      "layer1.conv1.weight", "layer1.conv2.weight", "layer2.conv1.weight", "layer2.conv2.weight",
      "layer2.shortcut.weight", "layer3.conv1.weight", "layer3.conv2.weight",
      "layer3.shortcut.weight", "layer4.conv1.weight", "layer4.conv2.weight"};
  EXPECT_EQ(by_role[R::Hidden], hidden);
  EXPECT_EQ(muon_names, hidden);
  EXPECT_EQ(by_role[R::Embedding], std::set<std::string>{"layer0.conv.weight"});
  EXPECT_EQ(by_role[R::Head], std::set<std::string>{"layer5.fc.weight"});
  EXPECT_EQ(by_role[R::Gain].size(), 1u + 2 + 3 + 3 + 2);  // stem bn; bn1, bn2 (+ shortcut_bn)
  EXPECT_TRUE(by_role[R::Gain].count("layer2.shortcut_bn.weight"));
  EXPECT_EQ(by_role[R::Bias].size(), by_role[R::Gain].size() + 1);  // and the classifier's
  EXPECT_TRUE(by_role[R::Bias].count("layer5.fc.bias"));
}

// Training mode: each forward normalises with its batch's statistics and moves the running
// ones by momentum 0.1; eval mode normalises with the running ones and leaves them.
TEST(CnnModel, BatchNormTrainsOnBatchStatisticsAndEvaluatesOnRunningOnes) {
  const auto model = make_model(cnn_config());
  const auto stem = model->make_stage(0, 1);
  const auto x = cnn_example(*model, 5).inputs;
  const auto conv = stem->named_children()[0].value()->named_children()[0].value();  // layer0.conv
  const auto pre = std::dynamic_pointer_cast<torch::nn::Conv2dImpl>(conv)->forward(x);
  const auto mean = pre.mean({0, 2, 3}), var = pre.var({0, 2, 3}, /*unbiased=*/true);
  const auto biased_var = pre.var({0, 2, 3}, /*unbiased=*/false);
  const auto buffers = stem->named_buffers();
  const auto out = stem->forward(x);
  const auto normalised = (pre - mean.view({1, -1, 1, 1})) / (biased_var.view({1, -1, 1, 1}) + 1e-5).sqrt();
  EXPECT_EQ(testing::elementwise_mismatch(out, torch::relu(normalised), 1e-12, 1e-12), "");
  EXPECT_EQ(testing::elementwise_mismatch(buffers["layer0.bn.running_mean"], 0.1 * mean), "");
  EXPECT_EQ(testing::elementwise_mismatch(buffers["layer0.bn.running_var"], 0.9 + 0.1 * var), "");
  stem->eval();
  const auto running_mean = buffers["layer0.bn.running_mean"].clone();
  const auto evaluated = stem->forward(x);
  const auto with_running = (pre - running_mean.view({1, -1, 1, 1})) /
                            (buffers["layer0.bn.running_var"].view({1, -1, 1, 1}) + 1e-5).sqrt();
  EXPECT_EQ(testing::elementwise_mismatch(evaluated, torch::relu(with_running), 1e-12, 1e-12), "");
  EXPECT_TRUE(torch::equal(buffers["layer0.bn.running_mean"], running_mean));
}

TEST(CnnModel, AccuracyIsTheShareOfRowsWhoseLargestLogitIsTheLabel) {
  const auto model = make_model(cnn_config());
  const auto head = model->make_stage(5, 6);
  auto logits = torch::zeros({4, 10}, torch::kFloat64);
  logits.index_put_({0, 3}, 1.0);
  logits.index_put_({1, 2}, 1.0);
  logits.index_put_({2, 7}, 1.0);
  logits.index_put_({3, 0}, 1.0);
  const auto labels = torch::tensor({3, 2, 1, 1}, torch::kInt64);
  const auto measures = head->validation_measures(logits, labels);
  ASSERT_EQ(measures.size(), 1u);
  EXPECT_EQ(measures[0].first, "accuracy");
  EXPECT_DOUBLE_EQ(measures[0].second, 0.5);
}

FashionMnist tiny_images() {
  FashionMnist data;
  for (auto* split : {&data.train, &data.test}) {
    split->count = split == &data.train ? 7 : 5;
    split->height = split->width = 2;
    for (int64_t i = 0; i < split->count; ++i) {
      for (int p = 0; p < 4; ++p) split->pixels.push_back(uint8_t(10 * i + p));
      split->labels.push_back(uint8_t(i % 10));
    }
  }
  return data;
}

TEST(ImageBatchSource, EachEpochVisitsEveryTrainingImageOnceInItsOwnOrder) {
  const ImageBatchSource source(tiny_images(), torch::kFloat64, "tiny");
  EXPECT_EQ(source.tokens_per_row(), 1);
  // 7 images, batches of 7: step k is epoch k.
  std::vector<std::vector<int64_t>> orders;
  for (int64_t step = 0; step < 3; ++step) {
    const Microbatch batch = source.train_batch(9, step, 7);
    EXPECT_EQ(batch.inputs.sizes().vec(), (std::vector<int64_t>{7, 1, 2, 2}));
    EXPECT_EQ(batch.labels.scalar_type(), torch::kInt64);
    const auto labels = batch.labels.contiguous();
    orders.emplace_back(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + 7);
    EXPECT_EQ(std::set<int64_t>(orders.back().begin(), orders.back().end()).size(), 7u);
    EXPECT_TRUE(torch::equal(batch.inputs, source.train_batch(9, step, 7).inputs));  // a pure function
  }
  EXPECT_FALSE(orders[0] == orders[1] && orders[1] == orders[2]);
  // Batches of 3 run through the same sequence: step 2 of 3 rows is rows 6, 7, 8 of it.
  const auto crossing = source.train_batch(9, 2, 3).labels;
  EXPECT_EQ(crossing[0].item<int64_t>(), orders[0][6]);
  EXPECT_EQ(crossing[1].item<int64_t>(), orders[1][0]);
  EXPECT_NE(source.train_batch(10, 0, 7).labels.equal(source.train_batch(9, 0, 7).labels), true);
}

TEST(ImageBatchSource, ValidationWalksTheTestSplitAndNormalisesLikeTraining) {
  const ImageBatchSource source(tiny_images(), torch::kFloat64, "tiny");
  // Training pixels 10 i + p, i < 7, p < 4: mean 31.5, population deviation over 28 values.
  double squares = 0;
  for (int i = 0; i < 7; ++i) for (int p = 0; p < 4; ++p) squares += std::pow(10 * i + p - 31.5, 2);
  const double deviation = std::sqrt(squares / 28);
  const Microbatch second = source.val_batch(1, 3);  // test images 3, 4, then 0 (wrapped)
  EXPECT_TRUE(torch::equal(second.labels, torch::tensor({3, 4, 0}, torch::kInt64)));
  EXPECT_NEAR(second.inputs[0][0][1][1].item<double>(), (33 - 31.5) / deviation, 1e-15);
  EXPECT_NEAR(second.inputs[2][0][0][0].item<double>(), (0 - 31.5) / deviation, 1e-15);
}

TEST(ImageBatchSource, ATextFormatForTheCnnIsOneLineNamingBoth) {
  Config c = cnn_config();
  c.model.dtype = "float32";
  c.model.seq_len = 8;
  try {
    make_batch_source(c, PIPETRAIN_SOURCE_DIR);
    FAIL() << "no error";
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "data.format 'bytes' is not data for model.kind 'cnn', which trains on "
                               "fashion-mnist, safetensors");
  }
}

}  // namespace
}  // namespace pipetrain
