#include "speech/resample.h"

#include <cmath>
#include <numeric>

#include "core/error.h"

namespace pipetrain::speech {
namespace {

constexpr double kResamplePi = 3.14159265358979323846;

// taps[phase][j]: the weight of input sample floor(t) + j - half for output phase `phase`,
// where t = n * down / up and phase = (n * down) mod up.
struct PhaseTable {
  int64_t up = 1, down = 1, half = 0;
  std::vector<std::vector<float>> taps;
};

PhaseTable make_phase_table(int from_rate, int to_rate, const ResampleFilter& filter) {
  const int64_t common = std::gcd(from_rate, to_rate);
  PhaseTable table;
  table.up = to_rate / common;
  table.down = from_rate / common;
  // Cutoff in cycles per input sample; the kernel reaches zero_crossings lobes of its sinc.
  const double cutoff = filter.rolloff * 0.5 * std::min(1.0, double(to_rate) / from_rate);
  const double reach = filter.zero_crossings / (2.0 * cutoff);
  table.half = int64_t(std::ceil(reach));
  table.taps.assign(size_t(table.up), std::vector<float>(size_t(2 * table.half + 1)));
  for (int64_t phase = 0; phase < table.up; ++phase) {
    const double fraction = double(phase) / double(table.up);
    for (int64_t j = 0; j <= 2 * table.half; ++j) {
      const double distance = fraction - double(j - table.half);  // t - k, in input samples
      if (std::abs(distance) >= reach) continue;
      const double x = 2.0 * cutoff * distance;
      const double sinc = x == 0 ? 1.0 : std::sin(kResamplePi * x) / (kResamplePi * x);
      const double window = 0.5 * (1.0 + std::cos(kResamplePi * distance / reach));
      table.taps[size_t(phase)][size_t(j)] = float(2.0 * cutoff * sinc * window);
    }
  }
  return table;
}

}  // namespace

std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate,
                            const ResampleFilter& filter) {
  if (from_rate <= 0 || to_rate <= 0) fail("sample rates must be positive");
  if (from_rate == to_rate) return samples;
  const PhaseTable table = make_phase_table(from_rate, to_rate, filter);
  const auto count = int64_t(samples.size());
  std::vector<float> out(size_t(count * table.up / table.down));
  for (int64_t n = 0; n < int64_t(out.size()); ++n) {
    const int64_t position = n * table.down;
    const int64_t first = position / table.up - table.half;
    const std::vector<float>& taps = table.taps[size_t(position % table.up)];
    double sum = 0;
    for (int64_t j = 0; j < int64_t(taps.size()); ++j) {
      const int64_t k = first + j;
      if (k >= 0 && k < count) sum += double(taps[size_t(j)]) * samples[size_t(k)];
    }
    out[size_t(n)] = float(sum);
  }
  return out;
}

std::vector<float> resample_pcm16(const std::vector<int16_t>& samples, int from_rate, int to_rate,
                                  const ResampleFilter& filter) {
  std::vector<float> scaled(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) scaled[i] = float(samples[i]) / 32768.0f;
  return resample(scaled, from_rate, to_rate, filter);
}

}  // namespace pipetrain::speech
