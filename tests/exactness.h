#pragma once
// The tolerance of the exactness proofs, which run in float64 (model.dtype = "float64").
//
// Two runs of the same update rule differ only in summation order (microbatches summed
// before or after the backward, stages all-reducing, chunked logits, token slices). In float64
// a reordered sum of n terms differs by at most about n * 1.1e-16 relative to the sum of the
// terms' magnitudes; with the tiny models here (sums of <= ~10^4 terms, a few steps of Adam,
// which divides by sqrt(v) and so can amplify a relative difference where a gradient is small)
// that stays near 1e-13. 1e-9 is four orders of magnitude above it, yet far below anything a
// wrong update rule, a lost microbatch or a stale weight changes (>= 1e-4 relative here).
// The absolute 1e-12 covers values that are zero up to rounding: the attention key bias, whose
// true gradient is zero (softmax ignores a shift shared by all keys), so Adam moves it by
// lr * noise / (|noise| + eps) <= 1e-2 * 1e-19 / 1e-8 = 1e-13 per step.
#include <cmath>

namespace pipetrain::testing {

constexpr double kExactRelative = 1e-9;
constexpr double kExactAbsolute = 1e-12;

inline bool exactly_close(double got, double want, double rtol = kExactRelative,
                          double atol = kExactAbsolute) {
  return std::abs(got - want) <= rtol * std::abs(want) + atol;
}

}  // namespace pipetrain::testing
