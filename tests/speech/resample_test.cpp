// Band-limited resampling 22050 Hz -> 16 kHz against the sampled sine it must reproduce.
#include <gtest/gtest.h>

#include <cmath>

#include "speech/resample.h"

namespace pipetrain::speech {
namespace {

constexpr double kResampleTestPi = 3.14159265358979323846;

std::vector<float> sampled_sine(double hz, int rate, int64_t samples) {
  std::vector<float> wave(static_cast<size_t>(samples));
  for (int64_t n = 0; n < samples; ++n) {
    wave[size_t(n)] = float(0.5 * std::sin(2 * kResampleTestPi * hz * double(n) / rate));
  }
  return wave;
}

TEST(Resample, KeepsTheDurationAtTheNewRate) {
  EXPECT_EQ(resample(std::vector<float>(22050), 22050, 16000).size(), 16000u);
  EXPECT_EQ(resample(std::vector<float>(441), 22050, 16000).size(), 320u);
  EXPECT_EQ(resample(std::vector<float>(100), 22050, 16000).size(), 72u);  // floor(100*320/441)
  EXPECT_EQ(resample(std::vector<float>(7), 16000, 16000).size(), 7u);
}

// Away from the ends (where the filter runs off the signal) a passband sine at 22050 Hz becomes
// the same sine sampled at 16 kHz. The passband ends near 6.6 kHz: the cutoff (0.95 x 8 kHz)
// less the transition half-width of a 16-lobe windowed sinc (about 2 x cutoff / 16).
TEST(Resample, PassbandSineBecomesTheSineSampledAtTheNewRate) {
  for (const double hz : {100.0, 1000.0, 3500.0, 6000.0}) {
    const auto out = resample(sampled_sine(hz, 22050, 22050), 22050, 16000);
    const auto expected = sampled_sine(hz, 16000, 16000);
    double worst = 0;
    for (size_t n = 100; n + 100 < out.size(); ++n) {
      worst = std::max(worst, std::abs(double(out[n]) - expected[n]));
    }
    EXPECT_LT(worst, 2e-3) << hz << " Hz";  // amplitude 0.5: passband ripple under 0.4%
  }
}

// A tone above the new Nyquist frequency (8 kHz) must not alias into the output.
TEST(Resample, ToneAboveTheNewNyquistIsFilteredOut) {
  const auto out = resample(sampled_sine(10000, 22050, 22050), 22050, 16000);
  double energy = 0;
  for (size_t n = 100; n + 100 < out.size(); ++n) energy += double(out[n]) * out[n];
  const double rms = std::sqrt(energy / double(out.size() - 200));
  EXPECT_LT(rms, 1e-3 * 0.5 / std::sqrt(2.0));  // below -60 dB of the input's RMS
}

TEST(Resample, Pcm16IsScaledToUnitRange) {
  const auto out = resample_pcm16({-32768, 0, 16384}, 16000, 16000);
  EXPECT_EQ(out, (std::vector<float>{-1.0f, 0.0f, 0.5f}));
}

}  // namespace
}  // namespace pipetrain::speech
