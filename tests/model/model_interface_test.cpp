// The model interface as the engine sees it (model/model.h), on its GPT implementation: the
// registry, the specs receivers allocate from, stages chaining to the whole model's loss,
// shared parameters, parameter roles, analytic work and capabilities.
#include <gtest/gtest.h>

#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "../exactness.h"
#include "core/error.h"
#include "model/gpt.h"
#include "model/registry.h"
#include "model/token_batch.h"

namespace pipetrain {
namespace {

Config tiny_config() {
  Config c;
  c.model.vocab_size = 13;
  c.model.d_model = 16;
  c.model.heads = 4;
  c.model.layers = 2;
  c.model.seq_len = 6;
  c.model.dtype = "float64";
  c.train.seed = 5;
  return c;
}

Microbatch example_of(const Model& model, int64_t rows) {
  auto generator = at::detail::createCPUGenerator(11);
  return model.example(rows, generator);
}

TEST(ModelRegistry, GptIsTheDefaultKind) {
  EXPECT_EQ(model_kinds(), (std::vector<std::string>{"gpt", "llama", "cnn", "torchscript", "transducer"}));
  const auto model = make_model(Config{});
  EXPECT_EQ(model->kind(), "gpt");
  EXPECT_EQ(model->layer_count(), Config{}.model.layers + 2);
  EXPECT_EQ(model->describe(), "GPT 4 layers, d_model 128");
}

TEST(ModelRegistry, UnknownKindIsOneLineNamingTheKnownOnes) {
  Config c = tiny_config();
  c.model.kind = "rnn";
  try {
    make_model(c);
    FAIL() << "no error";
  } catch (const UserError& error) {
    EXPECT_STREQ(error.what(), "model.kind must be one of gpt, llama, cnn, torchscript, transducer, got 'rnn'");
  }
}

TEST(GptModelInterface, SpecsAreWhatStagesTakeAndProduce) {
  const auto model = make_model(tiny_config());
  const Microbatch example = example_of(*model, 3);
  const TensorSpec input = model->input_spec(3), labels = model->label_spec(3);
  EXPECT_EQ(example.inputs.sizes().vec(), input.shape);
  EXPECT_EQ(example.inputs.scalar_type(), input.dtype);
  EXPECT_EQ(example.labels.sizes().vec(), labels.shape);
  EXPECT_EQ(input.shape, (std::vector<int64_t>{3, 6}));
  EXPECT_EQ(input.dtype, torch::kInt64);
  for (int64_t b = 1; b < model->layer_count(); ++b) {
    const auto output = model->make_stage(0, b)->forward(example.inputs);
    const TensorSpec spec = model->boundary_spec(b, 3);
    EXPECT_EQ(output.sizes().vec(), spec.shape) << "boundary " << b;
    EXPECT_EQ(output.scalar_type(), spec.dtype) << "boundary " << b;
    EXPECT_EQ(spec.shape, (std::vector<int64_t>{3, 6, 16}));
    EXPECT_EQ(spec.dtype, torch::kFloat64);
  }
}

// Stages built separately chain to the whole model's loss, with full or chunked logits.
TEST(GptModelInterface, StagesChainToTheWholeModelsLoss) {
  for (const int64_t chunk : {0, 5}) {
    Config c = tiny_config();
    c.model.loss_chunk_tokens = chunk;
    const auto model = make_model(c);
    const Microbatch example = example_of(*model, 2);
    auto whole = model->make_whole();
    const double want = whole->loss(whole->forward(example.inputs), example.labels).item<double>();
    auto first = model->make_stage(0, 2), last = model->make_stage(2, model->layer_count());
    const double got = last->loss(last->forward(first->forward(example.inputs)), example.labels)
                           .item<double>();
    EXPECT_EQ(got, want) << "loss_chunk_tokens " << chunk;
    EXPECT_GT(want, 2.0);  // near log(13) = 2.56 for a fresh model
    EXPECT_LT(want, 3.2);
  }
  Config full = tiny_config(), chunked = tiny_config();
  chunked.model.loss_chunk_tokens = 5;
  const auto a = make_model(full), b = make_model(chunked);
  const Microbatch example = example_of(*a, 2);
  auto wa = a->make_whole(), wb = b->make_whole();
  EXPECT_TRUE(testing::exactly_close(
      wb->loss(wb->forward(example.inputs), example.labels).item<double>(),
      wa->loss(wa->forward(example.inputs), example.labels).item<double>()));
}

// The tied embedding/head: one tensor in a stage holding both layers, two equal copies named by
// the interface in stages holding one each.
TEST(GptModelInterface, SharedParameterCopiesAreRealParametersThatStartEqual) {
  const auto model = make_model(tiny_config());
  const auto shared = model->shared_parameters();
  ASSERT_EQ(shared.size(), 1u);
  ASSERT_EQ(shared[0].copies.size(), 2u);
  const auto& embedding = shared[0].copies[0];
  const auto& head = shared[0].copies[1];
  EXPECT_EQ(embedding.layer, 0);
  EXPECT_EQ(head.layer, 3);
  EXPECT_EQ(secondary_copies(*model), std::vector<std::string>{head.name});
  const auto whole = model->make_whole()->named_parameters();
  EXPECT_TRUE(whole.contains(embedding.name));
  EXPECT_FALSE(whole.contains(head.name));
  const auto first = model->make_stage(0, 1)->named_parameters();
  const auto last = model->make_stage(3, 4)->named_parameters();
  ASSERT_TRUE(first.contains(embedding.name));
  ASSERT_TRUE(last.contains(head.name));
  EXPECT_TRUE(torch::equal(first[embedding.name], last[head.name]));
}

TEST(GptModelInterface, EveryParameterHasItsRole) {
  const auto model = make_model(tiny_config());
  std::map<ParameterRole, std::set<std::string>> by_role;
  for (const auto& item : model->make_whole()->named_parameters()) {
    by_role[model->role_of(item.key(), item.value().sizes().vec())].insert(item.key());
  }
  by_role[model->role_of("layer3.tied_weight", {13, 16})].insert("layer3.tied_weight");
  using R = ParameterRole;
  EXPECT_EQ(by_role[R::Embedding], (std::set<std::string>{"layer0.token_weight", "layer0.position_weight"}));
  EXPECT_EQ(by_role[R::Head], std::set<std::string>{"layer3.tied_weight"});
  EXPECT_EQ(by_role[R::Hidden].size(), 2u * 4);  // qkv, attn_out, fc, fc_out per block
  EXPECT_TRUE(by_role[R::Hidden].count("layer1.qkv.weight"));
  EXPECT_EQ(by_role[R::Gain].size(), 2u * 2 + 1);  // ln1, ln2 per block, ln_f
  EXPECT_TRUE(by_role[R::Gain].count("layer3.ln_f.weight"));
  EXPECT_EQ(by_role[R::Bias].size(), 2u * 6 + 1);  // 4 linear + 2 norm biases per block, ln_f
  const auto whole = model->make_whole()->named_parameters();
  for (const auto& name : by_role[R::Hidden]) EXPECT_EQ(whole[name].dim(), 2) << name;
}

TEST(GptModelInterface, LayerWorkIsTheClosedForm) {
  const auto model = make_model(tiny_config());
  const double b = 3, s = 6, h = 16, v = 13;
  double parameters = 0;
  for (int64_t i = 0; i < model->layer_count(); ++i) parameters += model->layer_work(i, 3).parameters;
  EXPECT_EQ(parameters, double(parameter_count(*model->make_whole())));
  EXPECT_EQ(model->layer_work(0, 3).forward_flops, 0);
  EXPECT_EQ(model->layer_work(1, 3).forward_flops, 24 * b * s * h * h + 4 * b * s * s * h);
  EXPECT_EQ(model->layer_work(3, 3).forward_flops, 2 * b * s * h * v);
  EXPECT_EQ(model->layer_work(1, 3).output_values, b * s * h);
  EXPECT_EQ(model->layer_name(0), "embedding");
  EXPECT_EQ(model->layer_name(2), "block1");
  EXPECT_EQ(model->layer_name(3), "head");
}

TEST(GptModelInterface, CapabilitiesAreAskedForNotCast) {
  const auto model = make_model(tiny_config());
  EXPECT_EQ(model->sliceable_length(), 6);
  auto whole = model->make_whole();
  ASSERT_NE(whole->text_generator(), nullptr);
  EXPECT_EQ(model->make_stage(0, 2)->text_generator(), nullptr);  // not the whole model
  ASSERT_NE(model->make_stage(1, 2)->token_sliced(), nullptr);
  const auto a = whole->text_generator()->generate({1, 2}, 8, 1.0, 7);
  const auto b = generate(dynamic_cast<GptStack&>(*whole), {1, 2}, 8, 1.0, 7);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 8u);
  for (const int64_t token : a) EXPECT_TRUE(token >= 0 && token < 13) << token;
}

TEST(TokenBatchTensors, RowsBecomeInt64InputsAndLabels) {
  TokenBatch batch;
  batch.batch_size = 2;
  batch.seq_len = 3;
  batch.inputs = {1, 2, 3, 4, 5, 6};
  batch.targets = {2, 3, 4, 5, 6, 7};
  const Microbatch tensors = tensors_of(batch);
  EXPECT_TRUE(torch::equal(tensors.inputs, torch::tensor({1, 2, 3, 4, 5, 6}, torch::kInt64).view({2, 3})));
  EXPECT_TRUE(torch::equal(tensors.labels, torch::tensor({2, 3, 4, 5, 6, 7}, torch::kInt64).view({2, 3})));
}

// A dataset whose token at (row, position) encodes seed, step, row and position.
class CountingDataset : public Dataset {
 public:
  TokenBatch train_batch(uint64_t seed, int64_t step, int64_t rows) const override {
    return batch(int64_t(seed) * 1000 + step * 100, rows);
  }
  TokenBatch val_batch(int64_t index, int64_t rows) const override { return batch(-index * 100, rows); }
  int64_t train_tokens() const override { return 0; }
  int64_t val_tokens() const override { return 0; }
  int64_t seq_len() const override { return 3; }

 private:
  static TokenBatch batch(int64_t base, int64_t rows) {
    TokenBatch b;
    b.batch_size = rows;
    b.seq_len = 3;
    for (int64_t i = 0; i < rows * 3; ++i) {
      b.inputs.push_back(base + i);
      b.targets.push_back(base + i + 1);
    }
    return b;
  }
};

TEST(TokenBatchTensors, SourceRowsAreTheDatasetsRows) {
  const CountingDataset data;
  const TokenBatchSource source(data);
  const Microbatch batch = source.train_batch(2, 5, 6);
  const Microbatch rows = rows_of(batch, 2, 3);
  const Microbatch want = tensors_of(data.train_batch(2, 5, 6).rows(2, 3));
  EXPECT_TRUE(torch::equal(rows.inputs, want.inputs));
  EXPECT_TRUE(torch::equal(rows.labels, want.labels));
  EXPECT_EQ(rows.inputs[0][0].item<int64_t>(), 2000 + 500 + 2 * 3);  // seed 2, step 5, row 2
  EXPECT_TRUE(rows.inputs.is_contiguous());
  EXPECT_TRUE(torch::equal(source.val_batch(1, 2).inputs, tensors_of(data.val_batch(1, 2)).inputs));
}

}  // namespace
}  // namespace pipetrain
