// The lattice on its own (loss/transducer_lattice.h), on the CPU: its total against every
// alignment enumerated, and the identity that makes it a probability: every alignment crosses
// each anti-diagonal t + u = d exactly once, so the occupancies exp(alpha + beta - log Z) of a
// diagonal sum to 1. (The GPU kernel: bench/gpu_check.sh, GPU against CPU.)
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "loss/transducer_lattice.h"

namespace pipetrain::loss {
namespace {

struct Lattice {
  at::Tensor blank, emit, alpha, beta;
};

// Random transition log-probabilities of a T x (U+1) lattice (emit's last column -inf).
Lattice random_lattice(int64_t T, int64_t U1, uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  Lattice l;
  l.blank = -torch::rand({T, U1}, generator, torch::kFloat64) * 3;
  l.emit = -torch::rand({T, U1}, generator, torch::kFloat64) * 3;
  l.emit.select(1, U1 - 1).fill_(-std::numeric_limits<double>::infinity());
  l.alpha = torch::empty({T, U1}, torch::kFloat64);
  l.beta = torch::empty({T, U1}, torch::kFloat64);
  transducer_lattice(l.blank, l.emit, l.alpha, l.beta);
  return l;
}

// log of the summed probability of every alignment: blanks move t, labels move u, a final blank
// at (T-1, U) ends it.
double enumerated_log_total(const Lattice& l) {
  const int64_t T = l.blank.size(0), U1 = l.blank.size(1);
  const auto blank = l.blank.accessor<double, 2>(), emit = l.emit.accessor<double, 2>();
  double total = 0;
  std::function<void(int64_t, int64_t, double)> walk = [&](int64_t t, int64_t u, double lp) {
    if (t == T - 1 && u == U1 - 1) {
      total += std::exp(lp + blank[t][u]);
      return;
    }
    if (t < T - 1) walk(t + 1, u, lp + blank[t][u]);
    if (u < U1 - 1) walk(t, u + 1, lp + emit[t][u]);
  };
  walk(0, 0, 0.0);
  return std::log(total);
}

TEST(TransducerLattice, TotalIsEveryAlignmentsSum) {
  for (const auto& [T, U1] : {std::pair<int64_t, int64_t>{1, 1}, {1, 4}, {5, 1}, {4, 3}, {6, 5}}) {
    const Lattice l = random_lattice(T, U1, 7 + T * 10 + U1);
    const double log_total = enumerated_log_total(l);
    EXPECT_NEAR(l.beta[0][0].item<double>(), log_total, 1e-12 * std::fabs(log_total) + 1e-14) << T << "x" << U1;
    // alpha reaches the last cell with the same total once the final blank is taken.
    EXPECT_NEAR((l.alpha[T - 1][U1 - 1] + l.blank[T - 1][U1 - 1]).item<double>(), log_total,
                1e-12 * std::fabs(log_total) + 1e-14);
  }
}

TEST(TransducerLattice, EachAntiDiagonalsOccupanciesSumToOne) {
  const int64_t T = 30, U1 = 9;
  const Lattice l = random_lattice(T, U1, 3);
  const auto occupancy = (l.alpha + l.beta - l.beta[0][0]).exp();
  for (int64_t d = 0; d < T + U1 - 1; ++d) {
    double sum = 0;
    for (int64_t u = std::max<int64_t>(0, d - T + 1); u <= std::min(d, U1 - 1); ++u) {
      sum += occupancy[d - u][u].item<double>();
    }
    EXPECT_NEAR(sum, 1.0, 1e-12) << "diagonal " << d;
  }
}

TEST(TransducerLattice, RefusesTensorsThatAreNotOneLattice) {
  Lattice l = random_lattice(3, 2, 1);
  at::Tensor wrong = torch::empty({3, 3}, torch::kFloat64);
  EXPECT_THROW(transducer_lattice(l.blank, l.emit, wrong, l.beta), std::logic_error);
  at::Tensor single = l.alpha.to(torch::kFloat32);
  EXPECT_THROW(transducer_lattice(l.blank, l.emit, single, l.beta), std::logic_error);
}

}  // namespace
}  // namespace pipetrain::loss
