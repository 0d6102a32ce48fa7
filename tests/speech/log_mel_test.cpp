// The mel filterbank against its closed form (HTK mel points, triangles, partition of unity) and
// the log-mel of pure tones and silence.
#include <gtest/gtest.h>

#include <cmath>

#include "speech/log_mel.h"

namespace pipetrain::speech {
namespace {

constexpr double kMelTestPi = 3.14159265358979323846;

std::vector<float> sine_wave(double hz, double amplitude, int rate, int64_t samples) {
  std::vector<float> wave(size_t(samples), 0.0f);
  for (int64_t n = 0; n < samples; ++n) {
    wave[size_t(n)] = float(amplitude * std::sin(2 * kMelTestPi * hz * double(n) / rate));
  }
  return wave;
}

TEST(LogMel, HtkMelScaleIsItsClosedForm) {
  EXPECT_NEAR(hz_to_mel_htk(700), 2595 * std::log10(2.0), 1e-12);
  EXPECT_NEAR(hz_to_mel_htk(0), 0, 1e-12);
  EXPECT_NEAR(hz_to_mel_htk(8000), 2595 * std::log10(1 + 8000 / 700.0), 1e-12);
  for (const double hz : {0.0, 31.25, 440.0, 1000.0, 7999.0}) {
    EXPECT_NEAR(mel_to_hz_htk(hz_to_mel_htk(hz)), hz, 1e-9);
  }
}

TEST(LogMel, BandEdgesAreEquallySpacedInHtkMelFromMinToMax) {
  const LogMelSpec spec;
  const std::vector<double> edges = mel_band_edges(spec);
  ASSERT_EQ(edges.size(), 82u);
  EXPECT_NEAR(edges.front(), 0, 1e-9);
  EXPECT_NEAR(edges.back(), 8000, 1e-9);
  const double step = 2595 * std::log10(1 + 8000 / 700.0) / 81;
  for (size_t i = 1; i < edges.size(); ++i) {
    EXPECT_NEAR(hz_to_mel_htk(edges[i]) - hz_to_mel_htk(edges[i - 1]), step, 1e-9) << i;
  }
}

TEST(LogMel, FilterbankRowsAreUnitTrianglesOnTheirBandEdges) {
  const LogMelSpec spec;
  const std::vector<double> edges = mel_band_edges(spec);
  const auto bank = mel_filterbank(spec);
  ASSERT_EQ(bank.sizes(), (std::vector<int64_t>{80, 257}));
  const auto w = bank.accessor<double, 2>();
  const double bin_hz = 16000.0 / 512;
  for (int64_t m = 0; m < 80; ++m) {
    const double left = edges[size_t(m)], center = edges[size_t(m + 1)],
                 right = edges[size_t(m + 2)];
    double row_sum = 0;
    for (int64_t k = 0; k < 257; ++k) {
      const double hz = double(k) * bin_hz;
      double expected = 0;  // 0 outside (left, right), linear up to 1 at center, then down
      if (hz > left && hz <= center) expected = (hz - left) / (center - left);
      if (hz > center && hz < right) expected = (right - hz) / (right - center);
      EXPECT_NEAR(w[m][k], expected, 1e-12) << "filter " << m << " bin " << k;
      row_sum += w[m][k];
    }
    // A unit triangle sampled every bin_hz sums to its area / bin_hz within its peak (1).
    EXPECT_GT(row_sum, 0) << "filter " << m << " sees no FFT bin";
    EXPECT_NEAR(row_sum, (right - left) / 2 / bin_hz, 1.0) << "filter " << m;
  }
}

TEST(LogMel, FilterbankColumnsSumToOneBetweenTheFirstAndLastCentre) {
  const LogMelSpec spec;
  const std::vector<double> edges = mel_band_edges(spec);
  const auto column_sums = mel_filterbank(spec).sum(0);
  int checked = 0;
  for (int64_t k = 0; k < 257; ++k) {
    const double hz = double(k) * 16000.0 / 512;
    if (hz < edges[1] || hz > edges[80]) continue;
    EXPECT_NEAR(column_sums[k].item<double>(), 1.0, 1e-12) << "bin " << k;
    ++checked;
  }
  EXPECT_GT(checked, 240);
}

TEST(LogMel, FramesAreTheWholeWindowsThatFit) {
  const LogMelSpec spec;
  EXPECT_EQ(log_mel_frames(399, spec), 0);
  EXPECT_EQ(log_mel_frames(400, spec), 1);
  EXPECT_EQ(log_mel_frames(559, spec), 1);
  EXPECT_EQ(log_mel_frames(560, spec), 2);
  EXPECT_EQ(log_mel_frames(16000, spec), 98);  // 1 + (16000 - 400) / 160
}

TEST(LogMel, SineTonePeaksInTheFilterCentredOnIt) {
  const LogMelSpec spec;
  const std::vector<double> edges = mel_band_edges(spec);
  const auto bank = mel_filterbank(spec).to(torch::kFloat32);
  for (const int64_t filter : {30, 50, 70}) {
    const auto features =
        log_mel(sine_wave(edges[size_t(filter + 1)], 0.5, 16000, 16000), bank, spec);
    ASSERT_EQ(features.sizes(), (std::vector<int64_t>{98, 80}));
    const auto peaks = features.argmax(1);
    for (int64_t t = 0; t < 98; ++t) {
      EXPECT_EQ(peaks[t].item<int64_t>(), filter) << "frame " << t;
    }
  }
}

TEST(LogMel, SineAtAnFftBinHasAFilterEnergyBetweenItsClosedFormBounds) {
  // 1000 Hz is FFT bin 32 exactly. A sine of amplitude A under window w puts |X[32]| = A sum(w)/2
  // at its bin (its mirror image at -1000 Hz leaks < 1e-6 of that), so a filter of weight g there
  // sees at least g (A sum(w)/2)^2; and no filter (weights <= 1) sees more than the one-sided
  // spectrum's whole power, Parseval's (n_fft / 2) sum((w x)^2) ~ (n_fft / 2) (A^2 / 2) sum(w^2).
  const LogMelSpec spec;
  const auto bank64 = mel_filterbank(spec);
  const auto features = log_mel(sine_wave(1000, 0.5, 16000, 4000), bank64.to(torch::kFloat32), spec);
  const auto window = torch::hann_window(400, torch::kFloat64);
  const double sum_w = window.sum().item<double>();
  const double sum_w2 = window.square().sum().item<double>();
  const auto weights = bank64.select(1, 32);
  const int64_t filter = weights.argmax().item<int64_t>();
  const double lower = std::log(weights[filter].item<double>() * std::pow(0.5 * sum_w / 2, 2));
  const double upper = std::log(256 * (0.25 / 2) * sum_w2 * 1.01);  // 1%: the sine's w^2 ripple
  ASSERT_LT(lower, upper);
  for (int64_t t = 0; t < features.size(0); ++t) {
    const double value = features[t][filter].item<double>();
    EXPECT_GE(value, lower - 1e-5) << "frame " << t;
    EXPECT_LE(value, upper) << "frame " << t;
  }
}

TEST(LogMel, SilenceIsTheLogFloorEverywhere) {
  const LogMelSpec spec;
  const auto bank = mel_filterbank(spec).to(torch::kFloat32);
  const auto features = log_mel(std::vector<float>(1600, 0.0f), bank, spec);
  ASSERT_EQ(features.size(0), 8);
  EXPECT_TRUE(torch::all(features == float(std::log(1e-10))).item<bool>());
}

}  // namespace
}  // namespace pipetrain::speech
