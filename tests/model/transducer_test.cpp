// The RNN-T recognizer behind the model interface (model/transducer_model.h), its speech batches
// (model/speech_batch.h) and the edit distance behind the CER: closed forms, ragged lengths that
// do not depend on padding, stages that chain to the whole model's loss, the sample-wise loss
// equal to the batched reference, batches that are a pure function of (seed, step), one line per
// bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "../tiny_speech.h"
#include "core/error.h"
#include "device/precision.h"
#include "model/edit_distance.h"
#include "model/registry.h"
#include "model/speech_batch.h"
#include "model/transducer_layers.h"

namespace pipetrain {
namespace {

std::vector<int64_t> letters_of(const std::string& text) { return {text.begin(), text.end()}; }

TEST(EditDistance, ClosedForms) {
  EXPECT_EQ(edit_distance(letters_of("kitten"), letters_of("sitting")), 3);
  EXPECT_EQ(edit_distance(letters_of("sitting"), letters_of("kitten")), 3);
  EXPECT_EQ(edit_distance(letters_of(""), letters_of("abc")), 3);   // 3 insertions
  EXPECT_EQ(edit_distance(letters_of("abcd"), letters_of("")), 4);  // 4 deletions
  EXPECT_EQ(edit_distance(letters_of("same"), letters_of("same")), 0);
  EXPECT_EQ(edit_distance(letters_of("abc"), letters_of("cab")), 2);
  EXPECT_EQ(edit_distance(letters_of("flaw"), letters_of("lawn")), 2);
}

Config transducer_config(const std::string& loss = "sample-wise") {
  Config c;
  c.model.kind = "transducer";
  c.model.layers = 2;
  c.model.d_model = 8;
  c.model.heads = 2;
  c.model.seq_len = 40;
  c.model.max_labels = 6;
  c.model.transducer_loss = loss;
  c.model.dtype = "float64";
  c.data.format = "speech";
  c.data.path = testing::tiny_speech_file();
  c.train.seed = 5;
  return c;
}

TEST(SpeechBatches, PaddedFeaturesCarryTheirLengthsAndLabels) {
  const Config c = transducer_config();
  const auto source = make_batch_source(c, ".");
  const speech::SpeechFeatureFile file(c.data.path);
  const Microbatch batch = source->val_batch(1, 3);  // validation rows 3, 0, 1 (wrapping)
  ASSERT_EQ(batch.inputs.sizes().vec(), (std::vector<int64_t>{3, 40, 81}));
  ASSERT_EQ(batch.labels.sizes().vec(), (std::vector<int64_t>{3, 7}));
  const int64_t rows[] = {3, 0, 1};
  for (int64_t r = 0; r < 3; ++r) {
    const auto u = file.utterance(speech::SpeechSplit::validation, rows[r]);
    const int64_t frames = u.features.size(0), count = u.labels.size(0);
    EXPECT_EQ(speech_frame_counts(batch.inputs)[r].item<int64_t>(), frames);
    const auto mask = batch.inputs[r].select(1, 80);  // 1 within the utterance, 0 past its end
    EXPECT_TRUE(mask.narrow(0, 0, frames).eq(1.0).all().item<bool>());
    EXPECT_TRUE(mask.narrow(0, frames, 40 - frames).eq(0.0).all().item<bool>());
    const auto features = batch.inputs[r].narrow(1, 0, 80);
    EXPECT_EQ(features.narrow(0, frames, 40 - frames).abs().max().item<double>(), 0.0);
    // Normalised per mel bin over the utterance's own frames.
    const auto own = features.narrow(0, 0, frames);
    EXPECT_LT(own.mean(0).abs().max().item<double>(), 1e-12);
    EXPECT_NEAR(own.std(0, false).min().item<double>(), 1.0, 1e-9);
    EXPECT_EQ(speech_label_counts(batch.labels)[r].item<int64_t>(), count);
    EXPECT_TRUE(batch.labels[r].narrow(0, 1, count).equal(u.labels));
    EXPECT_EQ(batch.labels[r].narrow(0, 1 + count, 6 - count).abs().sum().item<int64_t>(), 0);
  }
}

// bench/gpu_bundle.sh carries this file to a GPU machine, written by the write_tiny_speech
// program: the same bytes the tests read (until 2026-12-03 the scripts found a machine-wide copy
// by a hand-kept name, which named an older file for three days).
TEST(SpeechBatches, TheBundlesProgramWritesTheTestsTinySpeechFile) {
  const auto out = test::fresh_folder("write_tiny_speech") / "features.bin";
  const std::string program = "'" + std::string(PIPETRAIN_BINARY_DIR) + "/tests/model/write_tiny_speech'";
  const std::string command = program + " '" + out.string() + "' 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const auto bytes = [](const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string written = bytes(out);
  EXPECT_GT(written.size(), 16u * 9 * 80 * 4);  // 16 utterances of 9 frames or more
  EXPECT_EQ(written, bytes(testing::tiny_speech_file()));
  EXPECT_NE(std::system((program + " 2>/dev/null").c_str()), 0);  // no path: usage, exit 2
}

TEST(SpeechBatches, EachEpochVisitsEveryTrainingUtteranceOnceInASeededOrder) {
  const auto source = make_batch_source(transducer_config(), ".");
  std::set<int64_t> frame_counts_seen;
  std::vector<int64_t> order;
  for (int64_t step = 0; step < 2; ++step) {  // 2 steps of 4 rows = the 8 training utterances
    const auto counts = speech_frame_counts(source->train_batch(11, step, 4).inputs);
    for (int64_t r = 0; r < 4; ++r) order.push_back(counts[r].item<int64_t>());
  }
  // Utterance n of the tiny file has 9 + (13 n mod 32) frames: all 8 training ones differ.
  const std::set<int64_t> want = {9, 22, 35, 16, 29, 10, 23, 36};
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()), want);
  const auto again = source->train_batch(11, 1, 4);
  EXPECT_TRUE(again.inputs.equal(source->train_batch(11, 1, 4).inputs));
  EXPECT_FALSE(again.inputs.equal(source->train_batch(12, 1, 4).inputs));
}

TEST(TransducerModel, EachLayerProducesItsBoundarySpecWithFrameCounts) {
  const auto model = make_model(transducer_config());
  ASSERT_EQ(model->layer_count(), 4);  // subsample, 2 encoder blocks, joint
  const auto batch = make_batch_source(transducer_config(), ".")->val_batch(0, 3);
  torch::Tensor x = batch.inputs;
  for (int64_t layer = 0; layer < model->layer_count(); ++layer) {
    x = model->make_stage(layer, layer + 1)->forward(x);
    EXPECT_EQ(x.sizes().vec(), (std::vector<int64_t>{3, 10, 9})) << model->layer_name(layer);
    if (layer + 1 < model->layer_count()) {
      EXPECT_EQ(model->boundary_spec(layer + 1, 3).shape, x.sizes().vec());
    }
    // ceil(ceil(frames / 2) / 2) encoder frames per utterance, marked 1 in the last channel and
    // the frames past them 0.
    const auto frames = speech_frame_counts(batch.inputs);
    const auto halved = torch::div(frames + 1, 2, "floor"),
               quartered = torch::div(halved + 1, 2, "floor");
    const auto within = torch::arange(x.size(1)).unsqueeze(0) < quartered.unsqueeze(1);
    EXPECT_TRUE(x.select(2, 8).eq(within.to(x.scalar_type())).all().item<bool>());
  }
  EXPECT_EQ(model->layer_name(0), "subsample");
  EXPECT_EQ(model->layer_name(2), "encoder1");
  EXPECT_EQ(model->layer_name(3), "joint");
}

// Frame counts cross a bfloat16 boundary exactly, long utterances' too: bfloat16 holds the
// integers only up to 256 (257 rounds to 256, 1001 to 1000), so the boundary carries a frame mask
// and the count is the number of its ones.
TEST(TransducerModel, FrameCountsCrossABfloat16BoundaryExactly) {
  const auto precision = device::precision_of(device::PrecisionKind::BFloat16Mixed);
  const auto counts = torch::tensor({257, 1001, 1, 1200}, torch::kInt64);
  const auto values = torch::randn({4, 1200, 3});
  const auto crossed = device::at_boundary(with_frame_counts(values, counts), precision);
  ASSERT_EQ(crossed.scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(split_frame_counts(crossed).second.equal(counts));
  EXPECT_NE(torch::tensor({257.0, 1001.0}).to(torch::kBFloat16).to(torch::kInt64)[0].item<int64_t>(), 257);
}

TEST(TransducerModel, StagesChainToTheWholeModelsLoss) {
  const auto model = make_model(transducer_config());
  const auto batch = make_batch_source(transducer_config(), ".")->train_batch(1, 0, 4);
  auto whole = model->make_whole();
  const double want = whole->loss(whole->forward(batch.inputs), batch.labels).item<double>();
  auto first = model->make_stage(0, 2), last = model->make_stage(2, 4);
  const double got =
      last->loss(last->forward(first->forward(batch.inputs)), batch.labels).item<double>();
  EXPECT_NEAR(got, want, 1e-12 * std::abs(want));
  EXPECT_GT(want, 0.0);
}

// An utterance's loss is the same alone, padded to 40 or to 64 frames, and in a ragged batch
// (the batch's loss is the mean of its utterances').
TEST(TransducerModel, RaggedUtterancesDoNotSeeTheirPadding) {
  Config wide = transducer_config();
  wide.model.seq_len = 64;
  const auto model = make_model(transducer_config()), wide_model = make_model(wide);
  const auto source = make_batch_source(transducer_config(), ".");
  const auto wide_source = make_batch_source(wide, ".");
  auto whole = model->make_whole(), wide_whole = wide_model->make_whole();
  const auto loss_of = [](StageModule& m, const Microbatch& b) {
    return m.loss(m.forward(b.inputs), b.labels).item<double>();
  };
  const Microbatch batch = source->val_batch(0, 4);
  double sum = 0;
  for (int64_t r = 0; r < 4; ++r) {
    const double alone = loss_of(*whole, rows_of(batch, r, 1));
    EXPECT_NEAR(loss_of(*wide_whole, rows_of(wide_source->val_batch(0, 4), r, 1)), alone,
                1e-12 * alone);
    sum += alone;
  }
  EXPECT_NEAR(loss_of(*whole, batch), sum / 4, 1e-12 * sum);
}

// The model's sample-wise loss and the batched reference: same loss, same gradients.
TEST(TransducerModel, SampleWiseLossEqualsTheBatchedReference) {
  const auto batch = make_batch_source(transducer_config(), ".")->train_batch(2, 0, 4);
  std::vector<std::vector<torch::Tensor>> gradients;
  std::vector<double> losses;
  for (const std::string method : {"sample-wise", "batched"}) {
    auto whole = make_model(transducer_config(method))->make_whole();
    const auto loss = whole->loss(whole->forward(batch.inputs), batch.labels);
    loss.backward();
    losses.push_back(loss.item<double>());
    std::vector<torch::Tensor> grads;
    for (const auto& p : whole->parameters()) grads.push_back(p.grad().clone());
    gradients.push_back(grads);
  }
  EXPECT_NEAR(losses[0], losses[1], 1e-12 * losses[1]);
  ASSERT_EQ(gradients[0].size(), gradients[1].size());
  for (size_t i = 0; i < gradients[0].size(); ++i) {
    const double scale = std::max(gradients[1][i].abs().max().item<double>(), 1e-30);
    EXPECT_LT((gradients[0][i] - gradients[1][i]).abs().max().item<double>(), 1e-10 * scale) << i;
  }
}

TEST(TransducerModel, ParameterRolesFollowTheirNames) {
  const auto model = make_model(transducer_config());
  auto whole = model->make_whole();
  std::map<ParameterRole, int> counts;
  for (const auto& item : whole->named_parameters()) counts[model->role_of(item.key(), item.value().sizes().vec())]++;
  EXPECT_EQ(model->role_of("layer1.norm1.weight", {}), ParameterRole::Gain);
  EXPECT_EQ(model->role_of("layer3.embedding.weight", {}), ParameterRole::Embedding);
  EXPECT_EQ(model->role_of("layer3.joint.output.weight", {}), ParameterRole::Head);
  EXPECT_EQ(model->role_of("layer3.predictor.bias_hh_l0", {}), ParameterRole::Bias);
  EXPECT_EQ(model->role_of("layer0.conv1.weight", {}), ParameterRole::Hidden);
  EXPECT_EQ(counts[ParameterRole::Gain], 4);  // 2 layer norms in each of 2 blocks
  EXPECT_THROW(model->role_of("conv1.weight", {}), std::invalid_argument);
}

// The transcripts shown at the end name each reference in words.
TEST(TransducerModel, DescribedExamplesShowTheReferenceText) {
  const auto batch = make_batch_source(transducer_config(), ".")->val_batch(0, 2);
  auto whole = make_model(transducer_config())->make_whole();
  const std::string text = whole->describe_examples(batch, 2);
  for (int64_t r = 0; r < 2; ++r) {
    const auto count = batch.labels[r][0].item<int64_t>();
    const auto labels = batch.labels[r].narrow(0, 1, count);
    std::vector<uint32_t> ids(labels.data_ptr<int64_t>(), labels.data_ptr<int64_t>() + count);
    EXPECT_NE(text.find("reference: " + speech::text_of_labels(ids) + "\n"), std::string::npos)
        << text;
  }
}

void expect_one_line_error(const Config& config, const std::string& fragment) {
  try {
    make_batch_source(config, ".");
    ADD_FAILURE() << "no error, expected: " << fragment;
  } catch (const UserError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(SpeechBatches, BadInputIsOneLine) {
  Config c = transducer_config();
  c.data.path = "/nonexistent/features.bin";
  expect_one_line_error(c, "make it with `pipetrain prepare-speech`");
  c = transducer_config();
  c.model.seq_len = 30;  // the tiny file's longest utterance has 40 frames
  expect_one_line_error(c, "frames, more than the maximum 30 (prepare with --max-frames 30 to drop longer ones, or raise model.seq_len)");
  c = transducer_config();
  c.model.max_labels = 5;  // and its longest label sequence 6 labels
  expect_one_line_error(c, "labels, more than the maximum 5 (raise model.max_labels)");
}

}  // namespace
}  // namespace pipetrain
