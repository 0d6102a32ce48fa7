#include "profile/slice_profile.h"

#include <algorithm>
#include <chrono>
#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/error.h"
#include "model/registry.h"
#include "train/run.h"

namespace pipetrain::profile {
namespace {

using Clock = std::chrono::steady_clock;

// One timed forward of the slice on top of a fresh cache of `context` tokens, then its
// backward: the output gradient plus (through the cached leaves) the K/V gradient of the context.
// `input` is the layer's input spec for the whole sequence (dimension 1: the tokens).
double time_slice_once(StageModule& block, const TensorSpec& input_spec, int64_t length,
                       int64_t context) {
  const auto sliced = [&](int64_t tokens) {
    auto shape = input_spec.shape;
    shape.at(1) = tokens;
    return torch::randn(shape, torch::dtype(input_spec.dtype));
  };
  TokenSlicedStage& slices = *block.token_sliced();
  block.zero_grad();
  SequenceKvCache cache;
  if (context > 0) {
    torch::NoGradGuard no_graph;  // only the cached K/V leaves matter
    slices.forward_slice(sliced(context), 0, cache);
  }
  auto input = sliced(length).requires_grad_(true);
  const auto start = Clock::now();
  auto output = slices.forward_slice(input, context, cache);
  output.backward(torch::ones_like(output));
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> slice_grid(int64_t seq_len) {
  std::set<int64_t> lengths, contexts = {0};
  for (int64_t l = 8; l < seq_len; l *= 2) lengths.insert(l);
  lengths.insert(seq_len);
  for (const int64_t eighths : {1, 2, 4, 6}) {
    const int64_t c = seq_len * eighths / 8 / 8 * 8;
    if (c > 0) contexts.insert(c);
  }
  std::vector<std::pair<int64_t, int64_t>> grid;
  for (const int64_t c : contexts) {
    for (const int64_t l : lengths) {
      if (l + c <= seq_len) grid.emplace_back(l, c);
    }
  }
  return grid;
}

plan::SliceProfile profile_token_slices(const Config& config, const SliceProfileOptions& options,
                                        const std::function<void(const std::string&)>& progress) {
  configure_compute_threads(options.threads);
  torch::manual_seed(uint64_t(config.train.seed));
  // Layer 1: the first layer past the inputs (GPT's first transformer block).
  const auto model = make_model(config);
  if (model->sliceable_length() == 0 || model->layer_count() < 3) {
    fail("model.kind '{}' has no token slices to profile", model->kind());
  }
  const auto block = model->make_stage(1, 2);
  const TensorSpec input_spec = model->boundary_spec(1, options.batch);
  plan::SliceProfile profile;
  profile.d_model = config.model.d_model;
  profile.heads = config.model.heads;
  profile.layers = config.model.layers;
  profile.seq_len = config.model.seq_len;
  profile.batch = options.batch;
  profile.threads = options.threads;
  // Rounds over the whole grid (the first one a warm-up), each point's median over the rounds:
  // a burst of load from other processes spreads over many points instead of skewing one.
  const auto grid = slice_grid(config.model.seq_len);
  std::vector<std::vector<double>> samples(grid.size());
  for (int round = 0; round <= options.repeats; ++round) {
    for (size_t i = 0; i < grid.size(); ++i) {
      const double seconds = time_slice_once(*block, input_spec, grid[i].first, grid[i].second);
      if (round > 0) samples[i].push_back(seconds);
    }
  }
  for (size_t i = 0; i < grid.size(); ++i) {
    const auto [length, context] = grid[i];
    profile.points.push_back({length, context, median(samples[i])});
    progress(fmt::format("slice of {} tokens after {}: {:.3f} ms", length, context,
                         1e3 * profile.points.back().seconds));
  }
  profile.fit = plan::fit_slice_latency(profile.points);
  return profile;
}

}  // namespace pipetrain::profile
