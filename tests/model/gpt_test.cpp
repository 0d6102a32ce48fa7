#include <gtest/gtest.h>

#include <torch/torch.h>

#include "core/error.h"
#include "model/gpt.h"
#include "model/state_io.h"

namespace pipetrain {
namespace {

GptConfig tiny() {
  GptConfig c;
  c.vocab_size = 13;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 2;
  c.seq_len = 6;
  return c;
}

torch::Tensor tokens(int64_t batch, int64_t length, int64_t seed) {
  torch::manual_seed(static_cast<uint64_t>(seed));
  return torch::randint(0, 13, {batch, length}, torch::kInt64);
}

TEST(Gpt, ShapesAndLayerList) {
  auto model = make_gpt(tiny(), 1);
  EXPECT_EQ(model->layers().size(), 4u);  // embedding, 2 blocks, head
  const auto logits = model->forward(tokens(3, 6, 0));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 6, 13}));
  EXPECT_EQ(model->forward(tokens(2, 4, 0)).sizes(), (std::vector<int64_t>{2, 4, 13}));
}

TEST(Gpt, TiedHeadHasNoParameterOfItsOwn) {
  auto model = make_gpt(tiny(), 1);
  const int64_t d = 16, v = 13, s = 6, blocks = 2;
  const int64_t block_params = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) +
                               (4 * d * d + d);
  EXPECT_EQ(parameter_count(*model), v * d + s * d + blocks * block_params + 2 * d);
  auto head = std::static_pointer_cast<LmHead>(model->layers().back());
  auto embedding = std::static_pointer_cast<TokenEmbedding>(model->layers().front());
  EXPECT_TRUE(head->tied_weight().is_same(embedding->token_weight));
}

TEST(Gpt, CausalMaskHidesTheFuture) {
  auto model = make_gpt(tiny(), 2);
  auto input = tokens(2, 6, 3);
  const auto before = model->forward(input);
  auto changed = input.clone();
  changed.index_put_({torch::indexing::Slice(), 4}, (input.select(1, 4) + 1) % 13);
  const auto after = model->forward(changed);
  using torch::indexing::Slice;
  EXPECT_TRUE(torch::equal(before.index({Slice(), Slice(0, 4)}), after.index({Slice(), Slice(0, 4)})));
  EXPECT_FALSE(torch::allclose(before.index({Slice(), 4}), after.index({Slice(), 4})));
}

TEST(Gpt, StagesBuiltSeparatelyEqualTheWholeModel) {
  auto whole = make_gpt(tiny(), 9);
  GptStack first(tiny(), 9, 0, 2), second(tiny(), 9, 2, 4);
  auto input = tokens(2, 6, 4);
  EXPECT_TRUE(torch::equal(whole->forward(input), second.forward(first.forward(input))));
  // the last stage owns a copy of the tied weight, registered as a parameter
  EXPECT_EQ(second.named_parameters().contains("layer3.tied_weight"), true);
}

TEST(Gpt, BlockGradientMatchesFiniteDifferences) {
  torch::manual_seed(0);
  GptStack stack(tiny(), 5, 1, 2);  // one transformer block
  stack.to(torch::kFloat64);
  auto x = torch::randn({2, 5, 16}, torch::kFloat64).requires_grad_(true);
  const auto weights = torch::randn({2, 5, 16}, torch::kFloat64);
  auto objective = [&](const torch::Tensor& input) { return (stack.forward(input) * weights).sum(); };
  objective(x).backward();
  std::vector<torch::Tensor> checked = {x};
  for (auto& p : stack.parameters()) checked.push_back(p);
  const double eps = 1e-6;
  for (auto& tensor : checked) {
    const auto analytic = tensor.grad().clone();
    auto flat = tensor.data().view(-1);
    for (int64_t i = 0; i < flat.numel(); i += std::max<int64_t>(1, flat.numel() / 7)) {
      torch::NoGradGuard no_grad;
      const double original = flat[i].item<double>();
      flat[i] = original + eps;
      const double plus = objective(x).item<double>();
      flat[i] = original - eps;
      const double minus = objective(x).item<double>();
      flat[i] = original;
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(analytic.view(-1)[i].item<double>(), numeric, 1e-6 + 1e-5 * std::abs(numeric));
    }
  }
}

TEST(Gpt, SameSeedSameWeightsDifferentSeedDifferentWeights) {
  auto a = make_gpt(tiny(), 3), b = make_gpt(tiny(), 3), c = make_gpt(tiny(), 4);
  auto input = tokens(1, 6, 0);
  EXPECT_TRUE(torch::equal(a->forward(input), b->forward(input)));
  EXPECT_FALSE(torch::equal(a->forward(input), c->forward(input)));
}

TEST(StateIo, RoundTripAndWrongModelIsRefused) {
  auto source = make_gpt(tiny(), 1), target = make_gpt(tiny(), 2);
  const auto entries = module_entries(*source);
  load_module_entries(*target, entries, "ckpt");
  auto input = tokens(2, 6, 1);
  EXPECT_TRUE(torch::equal(source->forward(input), target->forward(input)));
  GptConfig bigger = tiny();
  bigger.d_model = 32;
  auto other = make_gpt(bigger, 1);
  try {
    load_module_entries(*other, entries, "ckpt");
    FAIL() << "expected a shape mismatch";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what()).find("the model needs [13, 32]"), std::string::npos)
        << error.what();
  }
}

// GptConfig::dtype = float64: float32's initial weights converted exactly, the head still tied
// to the embedding (Module::to keeps each parameter's identity), a stage's own head copy and
// the activations in float64 too.
TEST(Gpt, Float64StartsFromTheFloat32WeightsAndKeepsTheTie) {
  GptConfig wide = tiny();
  wide.dtype = torch::kFloat64;
  auto narrow_model = make_gpt(tiny(), 5), wide_model = make_gpt(wide, 5);
  const auto n = narrow_model->named_parameters(), w = wide_model->named_parameters();
  ASSERT_EQ(n.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    ASSERT_EQ(w[i].value().scalar_type(), torch::kFloat64) << w[i].key();
    EXPECT_TRUE(torch::equal(w[i].value(), n[i].value().to(torch::kFloat64))) << w[i].key();
  }
  auto head = std::static_pointer_cast<LmHead>(wide_model->layers().back());
  auto embedding = std::static_pointer_cast<TokenEmbedding>(wide_model->layers().front());
  EXPECT_TRUE(head->tied_weight().is_same(embedding->token_weight));
  EXPECT_EQ(wide_model->forward(tokens(2, 6, 0)).scalar_type(), torch::kFloat64);
  GptStack last_stage(wide, 5, 2, 4);
  EXPECT_EQ(last_stage.head_weight().scalar_type(), torch::kFloat64);
  EXPECT_TRUE(torch::equal(last_stage.head_weight(), embedding->token_weight));
}

TEST(StateIo, Float64RoundTripsAndAnotherDtypeIsRefused) {
  GptConfig wide = tiny();
  wide.dtype = torch::kFloat64;
  auto source = make_gpt(wide, 1), target = make_gpt(wide, 2), narrow = make_gpt(tiny(), 2);
  const auto entries = module_entries(*source);
  for (const auto& entry : entries) EXPECT_EQ(entry.dtype, "F64") << entry.name;
  load_module_entries(*target, entries, "ckpt");
  auto input = tokens(2, 6, 1);
  EXPECT_TRUE(torch::equal(source->forward(input), target->forward(input)));
  try {
    load_module_entries(*narrow, entries, "ckpt");
    FAIL() << "expected a dtype mismatch";
  } catch (const UserError& error) {
    EXPECT_NE(std::string(error.what())
                  .find("ckpt: tensor 'layer0.token_weight' is float64 but this run's model.dtype "
                        "is float32: a checkpoint continues in its own dtype (set model.dtype = "
                        "\"float64\")"),
              std::string::npos)
        << error.what();
  }
}

TEST(Gpt, GenerationIsSeededAndStaysInVocabulary) {
  auto model = make_gpt(tiny(), 1);
  const auto a = generate(*model, {1, 2}, 10, 1.0, 7), b = generate(*model, {1, 2}, 10, 1.0, 7);
  EXPECT_EQ(a, b);
  ASSERT_EQ(a.size(), 10u);
  for (auto token : a) EXPECT_TRUE(token >= 0 && token < 13);
}

}  // namespace
}  // namespace pipetrain

namespace pipetrain {
namespace {

// Mixed precision pads a large vocabulary's head to aligned rows (GPU kernels), invisibly: the
// logits and every gradient are the unpadded bfloat16 product's.
TEST(LmHead, PaddedLowPrecisionProductEqualsTheUnpaddedOne) {
  EXPECT_EQ(aligned_head_rows(50257), 50304);
  EXPECT_EQ(aligned_head_rows(4095), 4095);
  EXPECT_EQ(aligned_head_rows(128256), 128256);
  GptConfig c = tiny();
  c.vocab_size = 4097;  // padded to 4160
  c.tied_head = false;
  c.precision = device::precision_of(device::PrecisionKind::BFloat16Mixed);
  torch::Generator generator = at::detail::createCPUGenerator(7);
  LmHead head(c, generator);
  const auto x = torch::randn({2, 3, c.d_model}, generator).requires_grad_();
  const auto weights = torch::randn({2, 3, c.vocab_size}, generator);
  torch::Tensor logits, reference;
  {
    device::ComputeScope scope(c.precision, torch::kCPU);
    logits = head.forward(x);
    reference = torch::matmul(head.normalize(x).to(torch::kBFloat16),
                              head.tied_weight().to(torch::kBFloat16).t());
  }
  ASSERT_EQ(logits.sizes(), reference.sizes());
  EXPECT_EQ(logits.scalar_type(), torch::kBFloat16);
  EXPECT_FALSE(logits.is_contiguous());  // a view of the 4160-column product
  // The same products of the same bfloat16 values, accumulated in float32: equal to a few
  // float32 roundings, far below bfloat16's 2^-8.
  EXPECT_LE((logits.to(torch::kFloat) - reference.to(torch::kFloat)).abs().max().item<double>(),
            1e-2 * reference.abs().max().item<double>() * std::ldexp(1.0, -8));
  const auto grad_of = [&](const torch::Tensor& out) {
    const auto grads = torch::autograd::grad({(out.to(torch::kFloat) * weights).sum()},
                                             {x, head.tied_weight()});
    return std::make_pair(grads[0], grads[1]);
  };
  const auto [dx, dw] = grad_of(logits);
  const auto [dx_ref, dw_ref] = grad_of(reference);
  EXPECT_TRUE(torch::allclose(dx, dx_ref, 1e-2, 1e-3)) << (dx - dx_ref).abs().max();
  EXPECT_TRUE(torch::allclose(dw, dw_ref, 1e-2, 1e-3)) << (dw - dw_ref).abs().max();
  EXPECT_GT(dw.abs().min().item<double>(), 0.0);  // every real row learns
}

}  // namespace
}  // namespace pipetrain
