#include "speech/log_mel.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pipetrain::speech {

double hz_to_mel_htk(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }

double mel_to_hz_htk(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

std::vector<double> mel_band_edges(const LogMelSpec& spec) {
  const double low = hz_to_mel_htk(spec.f_min);
  const double high = hz_to_mel_htk(spec.f_max);
  std::vector<double> edges(size_t(spec.mel_bins + 2));
  for (size_t i = 0; i < edges.size(); ++i) {
    edges[i] = mel_to_hz_htk(low + (high - low) * double(i) / double(spec.mel_bins + 1));
  }
  return edges;
}

torch::Tensor mel_filterbank(const LogMelSpec& spec) {
  const std::vector<double> edges = mel_band_edges(spec);
  const int64_t bins = spec.n_fft / 2 + 1;
  auto bank = torch::zeros({spec.mel_bins, bins}, torch::kFloat64);
  auto weights = bank.accessor<double, 2>();
  for (int64_t m = 0; m < spec.mel_bins; ++m) {
    const double left = edges[size_t(m)], center = edges[size_t(m + 1)],
                 right = edges[size_t(m + 2)];
    for (int64_t k = 0; k < bins; ++k) {
      const double hz = double(k) * spec.sample_rate / spec.n_fft;
      const double rising = (hz - left) / (center - left);
      const double falling = (right - hz) / (right - center);
      weights[m][k] = std::max(0.0, std::min(rising, falling));
    }
  }
  return bank;
}

int64_t log_mel_frames(int64_t samples, const LogMelSpec& spec) {
  if (samples < spec.win_length) return 0;
  return 1 + (samples - spec.win_length) / spec.hop_length;
}

namespace {

// In-place iterative radix-2 FFT of n = re.size() points (a power of two), in double.
void fft(std::vector<double>& re, std::vector<double>& im) {
  const size_t n = re.size();
  for (size_t i = 1, j = 0; i < n; ++i) {  // bit-reversal permutation
    size_t bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(re[i], re[j]), std::swap(im[i], im[j]);
  }
  for (size_t length = 2; length <= n; length <<= 1) {
    const double angle = -2.0 * M_PI / double(length);
    for (size_t start = 0; start < n; start += length) {
      for (size_t k = 0; k < length / 2; ++k) {
        const double w_re = std::cos(angle * double(k)), w_im = std::sin(angle * double(k));
        const size_t a = start + k, b = a + length / 2;
        const double t_re = re[b] * w_re - im[b] * w_im, t_im = re[b] * w_im + im[b] * w_re;
        re[b] = re[a] - t_re, im[b] = im[a] - t_im;
        re[a] += t_re, im[a] += t_im;
      }
    }
  }
}

// |X[k]|^2 for k = 0 .. n/2 of the real frame `x` (n points): the FFT above for a power of
// two, a direct DFT otherwise.
std::vector<double> power_spectrum(const std::vector<double>& x) {
  const size_t n = x.size(), bins = n / 2 + 1;
  std::vector<double> power(bins);
  if ((n & (n - 1)) == 0) {
    std::vector<double> re = x, im(n, 0.0);
    fft(re, im);
    for (size_t k = 0; k < bins; ++k) power[k] = re[k] * re[k] + im[k] * im[k];
    return power;
  }
  for (size_t k = 0; k < bins; ++k) {
    double re = 0, im = 0;
    for (size_t t = 0; t < n; ++t) {
      const double angle = -2.0 * M_PI * double(k * t % n) / double(n);
      re += x[t] * std::cos(angle), im += x[t] * std::sin(angle);
    }
    power[k] = re * re + im * im;
  }
  return power;
}

}  // namespace

// Plain loops in double, no BLAS or FFT library: the features are a function of the samples
// alone, whatever threads, load or CPU the libraries would have picked their code paths by
// (the same plan once gave different bytes beside other tests; docs/speech.md).
torch::Tensor log_mel(const std::vector<float>& samples, const torch::Tensor& filterbank,
                      const LogMelSpec& spec) {
  const int64_t frames = log_mel_frames(int64_t(samples.size()), spec);
  if (frames == 0) return torch::zeros({0, spec.mel_bins}, torch::kFloat32);
  const auto bank = filterbank.to(torch::kFloat64).contiguous();
  const int64_t bins = spec.n_fft / 2 + 1;
  const double* weights = bank.data_ptr<double>();
  // Each triangle's nonzero bins [first, last): the product skips the zeros.
  std::vector<std::pair<int64_t, int64_t>> support(size_t(spec.mel_bins), {0, 0});
  for (int64_t m = 0; m < spec.mel_bins; ++m) {
    int64_t first = bins, last = 0;
    for (int64_t k = 0; k < bins; ++k) {
      if (weights[m * bins + k] != 0) first = std::min(first, k), last = k + 1;
    }
    support[size_t(m)] = {first, std::max(first, last)};
  }
  // The periodic Hann window (torch.hann_window's), centred in n_fft points: frame t windows
  // exactly samples [t * hop, t * hop + win_length), as Kaldi does (no reflection at the ends).
  std::vector<double> window(size_t(spec.win_length));
  for (int64_t i = 0; i < spec.win_length; ++i) {
    window[size_t(i)] = 0.5 - 0.5 * std::cos(2.0 * M_PI * double(i) / double(spec.win_length));
  }
  const int64_t pad = (spec.n_fft - spec.win_length) / 2;
  auto features = torch::empty({frames, spec.mel_bins}, torch::kFloat32);
  float* out = features.data_ptr<float>();
  std::vector<double> frame(size_t(spec.n_fft));
  for (int64_t t = 0; t < frames; ++t) {
    std::fill(frame.begin(), frame.end(), 0.0);
    for (int64_t i = 0; i < spec.win_length; ++i) {
      frame[size_t(pad + i)] = double(samples[size_t(t * spec.hop_length + i)]) * window[size_t(i)];
    }
    const std::vector<double> power = power_spectrum(frame);
    for (int64_t m = 0; m < spec.mel_bins; ++m) {
      double energy = 0;
      for (int64_t k = support[size_t(m)].first; k < support[size_t(m)].second; ++k) {
        energy += weights[m * bins + k] * power[size_t(k)];
      }
      out[t * spec.mel_bins + m] = float(std::log(std::max(energy, spec.log_floor)));
    }
  }
  return features;
}

}  // namespace pipetrain::speech
