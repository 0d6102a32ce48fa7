#pragma once
// 80-bin log-mel features as speech recognizers use them: 25 ms Hann windows every 10 ms at
// 16 kHz, a 512-point FFT, power spectrum, an HTK-mel triangular filterbank, natural log.
#include <cstdint>
#include <vector>

#include <torch/torch.h>

namespace pipetrain::speech {

struct LogMelSpec {
  int sample_rate = 16000;
  int n_fft = 512;
  int win_length = 400;  // 25 ms
  int hop_length = 160;  // 10 ms
  int mel_bins = 80;
  double f_min = 0;
  double f_max = 8000;  // the Nyquist frequency at 16 kHz
  double log_floor = 1e-10;  // log(max(energy, floor)): silence stays finite
};

double hz_to_mel_htk(double hz);   // 2595 log10(1 + hz / 700)
double mel_to_hz_htk(double mel);  // its inverse
// mel_bins + 2 frequencies (Hz), equally spaced in HTK mel from f_min to f_max: filter m rises
// from point m to 1 at point m + 1 and falls to 0 at point m + 2.
std::vector<double> mel_band_edges(const LogMelSpec& spec);
// [mel_bins, n_fft / 2 + 1] float64: triangles linear in Hz, peak 1 (HTK, no area normalisation),
// evaluated at the FFT bin frequencies k * sample_rate / n_fft.
torch::Tensor mel_filterbank(const LogMelSpec& spec);

// Frames of a signal of `samples` samples: windows that fit whole (no padding), 0 when none does.
int64_t log_mel_frames(int64_t samples, const LogMelSpec& spec);
// [frames, mel_bins] float32 log-mel energies of samples at spec.sample_rate. `filterbank` is
// mel_filterbank(spec) (made once by the caller, shared by every utterance). Computed in double
// by plain loops (no BLAS or FFT library), so the bytes depend on the samples alone.
torch::Tensor log_mel(const std::vector<float>& samples, const torch::Tensor& filterbank,
                      const LogMelSpec& spec);

}  // namespace pipetrain::speech
