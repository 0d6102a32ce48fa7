#include "speech/log_mel.h"

#include <cmath>

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

torch::Tensor log_mel(const std::vector<float>& samples, const torch::Tensor& filterbank,
                      const LogMelSpec& spec) {
  const int64_t frames = log_mel_frames(int64_t(samples.size()), spec);
  if (frames == 0) return torch::zeros({0, spec.mel_bins}, torch::kFloat32);
  const auto used = torch::from_blob(const_cast<float*>(samples.data()),
                                     {spec.win_length + (frames - 1) * spec.hop_length},
                                     torch::kFloat32);
  // stft centres the window in n_fft samples; padding by the difference makes frame t window
  // exactly samples [t * hop, t * hop + win_length), as Kaldi does (no reflection at the ends).
  const int64_t pad = (spec.n_fft - spec.win_length) / 2;
  const auto signal = torch::constant_pad_nd(used, {pad, spec.n_fft - spec.win_length - pad});
  const auto window = torch::hann_window(spec.win_length, torch::kFloat32);
  const auto spectrum = torch::stft(signal, spec.n_fft, spec.hop_length, spec.win_length, window,
                                    /*center=*/false, "reflect", /*normalized=*/false,
                                    /*onesided=*/true, /*return_complex=*/true);
  const auto power = torch::abs(spectrum).square();  // [bins, frames]
  const auto energies = torch::matmul(filterbank, power).transpose(0, 1);  // [frames, mel]
  return torch::log(torch::clamp_min(energies, spec.log_floor)).contiguous();
}

}  // namespace pipetrain::speech
