#pragma once
// TeraPipe planning on an analytic latency model: how long a token slice takes on one pipeline
// stage, and the speedup of token slicing over microbatch-only pipelining.
#include <cstdint>
#include <string>
#include <vector>

#include "plan/analytic.h"
#include "plan/batch_token_slicer.h"
#include "plan/cluster.h"
#include "plan/token_slicer.h"
#include "schedule/schedule.h"
#include "sim/simulator.h"

namespace pipetrain::plan {

struct TeraPipeSetup {
  GptShape model;
  ClusterSpec cluster;
  int stages = 1;           // K pipeline stages, layers split evenly
  int tensor_parallel = 1;  // devices per stage sharing each layer (Megatron)
  int64_t batch = 1;        // sequences per optimizer step
  int64_t microbatch = 1;   // sequences per microbatch for the sliced run
  int64_t granularity = 8;  // slice lengths are multiples of this
};

// Forward + backward time of one stage for a slice of `length` tokens of `batch` sequences after
// `context` earlier tokens: FLOPs of the stage's layers (matmuls 24 b l h^2, attention
// 4 b l (c + l/2) h; backward twice the forward) over the sustained rate of its devices
// (ClusterSpec::sustained_flops: short slices underuse them).
double slice_latency_s(const TeraPipeSetup& setup, int64_t batch, int64_t length, int64_t context);

struct TeraPipeComparison {
  double microbatch_only_s = 0;  // microbatches of size 1, whole sequences: (B + K - 1) t(L)
  Slicing best_uniform;          // the best uniform slice count
  double uniform_s = 0;
  Slicing dp;                    // the DP's slicing of each microbatch
  double dp_s = 0;               // all microbatches: sum of slice times + (K - 1) max
  // TeraPipe's joint DP: microbatch sizes may differ, each microbatch sliced on its own.
  BatchAndTokenSlicing joint;
};

TeraPipeComparison compare_terapipe(const TeraPipeSetup& setup);

// The GPipe schedule of batch / microbatch microbatches, each cut into `slicing`'s slices, with
// per-slice costs from the latency model (forward a third, backward two thirds), simulated.
struct SlicedSimulation {
  schedule::Schedule schedule;
  sim::SimResult result;
};
SlicedSimulation simulate_sliced(const TeraPipeSetup& setup, const Slicing& slicing);

}  // namespace pipetrain::plan
