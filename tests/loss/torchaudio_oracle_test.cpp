// An independent oracle: torchaudio's rnnt_loss (its own CPU kernel, float32 throughout) on a
// random ragged batch, against the fused kernel per sample (float32 logits, lattice in double)
// and the batched reference. Tolerances: the losses (10-60 nats here) agree to 1e-5 relative.
// torchaudio keeps alpha and beta in float32: with |alpha|, |beta| up to ~60 nats and ~30
// log-additions on a path, their rounding reaches 60 * 30 * 6e-8 ~ 1e-4 in exp(alpha + beta -
// loss), so each gradient element (in [-1, 1]) agrees to 1e-4; our float64 run of the same
// logits lands as far from torchaudio as our float32 one (checked below), so the difference is
// torchaudio's rounding.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include <torch/torch.h>

#include "core/files.h"
#include "io/safetensors.h"
#include "loss/transducer.h"
#include "model/state_io.h"
#include "../pipetrain_run.h"

namespace pipetrain::loss {
namespace {

std::map<std::string, torch::Tensor> torchaudio_batch() {
  const auto path = std::filesystem::temp_directory_path() /
                    ("pipetrain_rnnt_torchaudio_" + std::to_string(getpid()) + ".safetensors");
  const auto run = testing::run_program(
      PIPETRAIN_PYTHON, std::string(PIPETRAIN_SOURCE_DIR) + "/tests/loss/rnnt_torchaudio.py " + path.string(), "", 120);
  EXPECT_EQ(run.exit_code, 0) << run.output;
  std::map<std::string, torch::Tensor> tensors;
  for (const auto& entry : decode_safetensors(read_file(path.string()), path.string())) {
    tensors[entry.name] = from_entry(entry);
  }
  std::filesystem::remove(path);
  return tensors;
}

TEST(TorchaudioOracle, FusedKernelMatchesRnntLossAndItsGradientPerSample) {
  auto batch = torchaudio_batch();
  ASSERT_EQ(batch.count("grads"), 1u);
  const auto& logits = batch["logits"];
  for (int64_t b = 0; b < logits.size(0); ++b) {
    const int64_t T = batch["logit_lengths"][b].item<int64_t>();
    const int64_t U = batch["target_lengths"][b].item<int64_t>();
    torch::Tensor sample = logits[b].narrow(0, 0, T).narrow(1, 0, U + 1).clone();
    const double loss = transducer_loss_and_grad_(sample, batch["targets"][b].narrow(0, 0, U), 0);
    const double expected = batch["losses"][b].item<double>();
    EXPECT_NEAR(loss, expected, 1e-5 * expected) << "sample " << b;
    const auto want = batch["grads"][b].narrow(0, 0, T).narrow(1, 0, U + 1);
    EXPECT_LE((sample - want).abs().max().item<double>(), 1e-4) << "sample " << b;
    torch::Tensor exact = logits[b].narrow(0, 0, T).narrow(1, 0, U + 1).to(torch::kFloat64);
    transducer_loss_and_grad_(exact, batch["targets"][b].narrow(0, 0, U), 0);
    EXPECT_LE((sample - exact).abs().max().item<double>(), 1e-6) << "sample " << b;
    // Outside the sample's lengths torchaudio's gradient is zero, as the padding's is here.
    EXPECT_EQ(batch["grads"][b].narrow(0, T, logits.size(1) - T).abs().sum().item<double>(), 0.0);
  }
}

TEST(TorchaudioOracle, BatchedReferenceMatchesRnntLossOnThePaddedBatch) {
  auto batch = torchaudio_batch();
  const auto logits = batch["logits"].clone().requires_grad_(true);
  TransducerOptions options;
  options.reduction = Reduction::None;
  const auto losses = transducer_loss_batched(logits, batch["targets"], batch["logit_lengths"],
                                              batch["target_lengths"], options);
  EXPECT_LE(((losses - batch["losses"]).abs() / batch["losses"]).max().item<double>(), 1e-5);
  losses.sum().backward();
  EXPECT_LE((logits.grad() - batch["grads"]).abs().max().item<double>(), 1e-4);
}

}  // namespace
}  // namespace pipetrain::loss
