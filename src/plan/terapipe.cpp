#include "plan/terapipe.h"

#include <algorithm>

#include "core/error.h"
#include "core/transformer_work.h"
#include "plan/token_slicer.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"

namespace pipetrain::plan {

double slice_latency_s(const TeraPipeSetup& setup, int64_t batch, int64_t length, int64_t context) {
  const double b = double(batch), l = double(length), c = double(context),
               h = double(setup.model.hidden);
  const double layers = double(setup.model.layers) / setup.stages;
  const double forward = layers * (gpt_block_linear_flops(b * l, h, 4 * h) + attention_flops(b * l, c + l / 2, h));
  // Tensor parallelism splits each GEMM's hidden dimension over the stage's devices; each still
  // sees all b * l tokens.
  const double rate = setup.cluster.sustained_flops(b * l) * setup.tensor_parallel;
  return 3 * forward / rate;
}

TeraPipeComparison compare_terapipe(const TeraPipeSetup& setup) {
  const int64_t length = setup.model.seq_len;
  if (setup.stages < 1 || setup.stages > setup.model.layers) {
    fail("--stages must be between 1 and the model's {} layers", setup.model.layers);
  }
  if (setup.batch < 1 || setup.microbatch < 1 || setup.batch % setup.microbatch != 0) {
    fail("--microbatch ({}) must divide --batch ({})", setup.microbatch, setup.batch);
  }
  if (setup.tensor_parallel < 1) fail("--tensor-parallel must be at least 1, got {}", setup.tensor_parallel);
  check_slice_granularity(setup.granularity, length);
  const int k = setup.stages;
  const double microbatches = double(setup.batch / setup.microbatch);
  TeraPipeComparison out;
  // Baseline: GPipe-style pipelining of whole sequences, one per microbatch.
  out.microbatch_only_s =
      (double(setup.batch) + k - 1) * slice_latency_s(setup, 1, length, 0);
  const SliceCost cost = [&](int64_t l, int64_t c) { return slice_latency_s(setup, setup.microbatch, l, c); };
  // With M microbatches sliced alike the pipeline runs every (microbatch, slice) once and fills
  // and drains once: T = M * sum(t_i) + (K - 1) max(t_i) = M * (sum + (K - 1) / M * max).
  auto total = [&](const Slicing& s) {
    double sum = 0, slowest = 0;
    int64_t context = 0;
    for (int64_t l : s.slices) {
      const double t = cost(l, context);
      sum += t, slowest = std::max(slowest, t), context += l;
    }
    return microbatches * sum + (k - 1) * slowest;
  };
  out.dp = optimal_token_slicing_weighted(length, (k - 1) / microbatches, cost, setup.granularity);
  out.dp_s = total(out.dp);
  out.uniform_s = 1e300;
  for (int64_t count = 1; count <= length / setup.granularity; count *= 2) {
    Slicing uniform = uniform_token_slicing(length, count, k, cost);
    const double t = total(uniform);
    if (t < out.uniform_s) out.uniform_s = t, out.best_uniform = uniform;
  }
  const BatchSliceCost batch_cost = [&](int64_t b, int64_t l, int64_t c) {
    return slice_latency_s(setup, b, l, c);
  };
  // The equal-microbatch plan's slowest slice is a candidate, so the joint plan is never worse.
  out.joint = optimal_batch_and_token_slicing(setup.batch, length, k, batch_cost, setup.granularity,
                                              400, {out.dp.max_slice_s});
  return out;
}

SlicedSimulation simulate_sliced(const TeraPipeSetup& setup, const Slicing& slicing) {
  schedule::ScheduleSpec spec;
  // TeraPipe's schedule: the one that takes token slices (GPipe).
  spec.name = schedule::schedule_names_where(
      [](const schedule::ScheduleEntry& e) { return e.parameters.slices; }).front();
  spec.stages = setup.stages;
  spec.microbatches = static_cast<int>(setup.batch / setup.microbatch);
  spec.slices = static_cast<int>(slicing.slices.size());
  sim::CostModel costs;
  double total_ms = 0;
  int64_t context = 0;
  for (int64_t length : slicing.slices) {
    const double ms = 1e3 * slice_latency_s(setup, setup.microbatch, length, context);
    costs.slice_fraction.push_back(ms);
    total_ms += ms;
    context += length;
  }
  for (double& share : costs.slice_fraction) share /= total_ms;
  sim::StageCost stage;
  stage.forward_ms = total_ms / 3;
  stage.backward_ms = 2 * total_ms / 3;
  stage.weight_ms = stage.backward_ms / 2;
  costs.stages = {stage};
  SlicedSimulation out{schedule::make_schedule(spec), {}};
  out.result = sim::simulate(out.schedule, costs);
  return out;
}

}  // namespace pipetrain::plan
