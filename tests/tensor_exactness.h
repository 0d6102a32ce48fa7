#pragma once
// The float64 proofs' tolerance (exactness.h) applied to every element of a tensor.
#include <string>

#include <fmt/format.h>
#include <torch/torch.h>

#include "exactness.h"

namespace pipetrain::testing {

// Empty if every element satisfies |got - want| <= rtol |want| + atol; otherwise how many are
// out and the worst one (index, both values), for the failure message.
inline std::string elementwise_mismatch(const torch::Tensor& got, const torch::Tensor& want,
                                        double rtol = kExactRelative,
                                        double atol = kExactAbsolute) {
  if (got.sizes() != want.sizes()) return "shapes differ";
  const auto g = got.detach().to(torch::kFloat64).flatten();
  const auto w = want.detach().to(torch::kFloat64).flatten();
  const auto excess = (g - w).abs() - (w.abs() * rtol + atol);
  const int64_t out = (excess > 0).sum().item<int64_t>();
  if (out == 0) return "";
  const int64_t worst = excess.argmax().item<int64_t>();
  return fmt::format("{} of {} elements off; worst [{}]: got {:.17g}, want {:.17g}", out,
                     g.numel(), worst, g[worst].item<double>(), w[worst].item<double>());
}

}  // namespace pipetrain::testing
