#pragma once
// Band-limited resampling by a rational factor (espeak-ng's 22050 Hz -> 16 kHz): a Hann-windowed
// sinc low-pass, evaluated per output sample from a table of the factor's phases. With the
// defaults, 22050 -> 16000 Hz is flat to 0.4% up to about 6.6 kHz and rejects 60 dB above 8 kHz.
// No libtorch.
#include <cstdint>
#include <vector>

namespace pipetrain::speech {

struct ResampleFilter {
  int zero_crossings = 16;  // sinc lobes on each side: more = sharper band edge, more work
  double rolloff = 0.95;    // cutoff as a fraction of the lower Nyquist frequency
};

// Samples in [-1, 1) (int16 / 32768) at `to_rate`; floor(n * to_rate / from_rate) of them.
std::vector<float> resample_pcm16(const std::vector<int16_t>& samples, int from_rate, int to_rate,
                                  const ResampleFilter& filter = {});
std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate,
                            const ResampleFilter& filter = {});

}  // namespace pipetrain::speech
