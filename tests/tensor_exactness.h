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

// elementwise_mismatch for a model parameter named `name` after training with `optimizer`,
// with one exception. The key third of an attention `qkv.bias` has an exactly zero gradient
// for every input (softmax ignores a shift shared by all keys), so in exact arithmetic it stays
// at its initial 0 and never changes any output, loss or other weight. Computed, its gradient
// is rounding noise: ~1e-19 through materialised scores, larger through
// at::scaled_dot_product_attention's fused kernel, whose backward sums the keys' gradients
// blockwise. AdamW divides that noise by about eps and moved the weight past the absolute
// tolerance (seen: -1.3e-12 against 3.4e-13 after 2 steps on 2 replicas), and Adam's coupled L2
// decay feeds the weight back into its own gradient (-lr * weight_decay / eps per update, -1e4
// here; seen: 1e-3 after 16 per-microbatch updates): either way its value is amplified noise,
// which any change of summation order changes. Under both only the query and value thirds are
// compared (SGD moves it by lr x noise, inside the tolerance: it is compared whole).
inline std::string parameter_mismatch(const std::string& name, const torch::Tensor& got,
                                      const torch::Tensor& want, const std::string& optimizer) {
  const std::string suffix = "qkv.bias";
  const bool qkv_bias = name.size() >= suffix.size() &&
                        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  if (optimizer == "sgd" || !qkv_bias || got.sizes() != want.sizes()) {
    return elementwise_mismatch(got, want);
  }
  const int64_t d = want.size(0) / 3;
  const auto query_and_value = [d](const torch::Tensor& t) {
    return torch::cat({t.slice(0, 0, d), t.slice(0, 2 * d)});
  };
  return elementwise_mismatch(query_and_value(got), query_and_value(want));
}

}  // namespace pipetrain::testing
