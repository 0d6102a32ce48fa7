#include "profile/slice_profile.h"

#include <set>

#include <fmt/format.h>
#include <torch/torch.h>

#include "model/gpt.h"
#include "profile/layer_profile.h"
#include "train/run.h"
#include "train/trainer.h"

namespace pipetrain::profile {
namespace {

// Forward of the slice on top of a fresh cache of `context` tokens, then its backward: the
// output gradient plus (through the cached leaves) the K/V gradient of the context.
double time_slice(GptStack& block, int64_t batch, int64_t length, int64_t context, int repeats) {
  const int64_t d = block.config().d_model;
  SequenceKvCache cache;
  torch::Tensor input, output;
  const auto prepare = [&] {
    block.zero_grad();
    cache = SequenceKvCache();
    if (context > 0) {
      torch::NoGradGuard no_graph;  // only the cached K/V leaves matter
      block.forward_slice(torch::randn({batch, context, d}), 0, cache);
    }
    input = torch::randn({batch, length, d}).requires_grad_(true);
  };
  return median_seconds(repeats, prepare, [&] {
    output = block.forward_slice(input, context, cache);
    output.backward(torch::ones_like(output));
  });
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
  GptStack block(gpt_config_from(config.model), uint64_t(config.train.seed), 1, 2);
  plan::SliceProfile profile;
  profile.d_model = config.model.d_model;
  profile.heads = config.model.heads;
  profile.layers = config.model.layers;
  profile.seq_len = config.model.seq_len;
  profile.batch = options.batch;
  profile.threads = options.threads;
  for (const auto& [length, context] : slice_grid(config.model.seq_len)) {
    const double seconds = time_slice(block, options.batch, length, context, options.repeats);
    profile.points.push_back({length, context, seconds});
    progress(fmt::format("slice of {} tokens after {}: {:.3f} ms", length, context, 1e3 * seconds));
  }
  profile.fit = plan::fit_slice_latency(profile.points);
  return profile;
}

}  // namespace pipetrain::profile
