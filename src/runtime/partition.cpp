#include "runtime/partition.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"

namespace pipetrain::runtime {

std::vector<double> gpt_layer_parameter_counts(const ModelConfig& model) {
  const double d = double(model.d_model), v = double(model.vocab_size), t = double(model.seq_len);
  std::vector<double> counts;
  counts.push_back(v * d + t * d);                                       // embedding
  for (int64_t i = 0; i < model.layers; ++i) counts.push_back(12 * d * d + 13 * d);  // block
  counts.push_back(v * d + 2 * d);                                       // head (logits + ln_f)
  return counts;
}

std::vector<int64_t> balanced_layer_counts(const std::vector<double>& weights, int64_t stages) {
  const int64_t n = int64_t(weights.size());
  if (stages < 1 || stages > n) fail("cannot split {} layers into {} stages", n, stages);
  std::vector<double> prefix(n + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weights[i];
  const double inf = std::numeric_limits<double>::infinity();
  // best[s][i]: lightest possible heaviest group splitting the first i layers into s groups.
  std::vector<std::vector<double>> best(stages + 1, std::vector<double>(n + 1, inf));
  std::vector<std::vector<int64_t>> cut(stages + 1, std::vector<int64_t>(n + 1, 0));
  best[0][0] = 0;
  for (int64_t s = 1; s <= stages; ++s) {
    for (int64_t i = s; i <= n; ++i) {
      for (int64_t j = s - 1; j < i; ++j) {
        const double value = std::max(best[s - 1][j], prefix[i] - prefix[j]);
        if (value < best[s][i]) best[s][i] = value, cut[s][i] = j;
      }
    }
  }
  std::vector<int64_t> counts(stages);
  for (int64_t s = stages, i = n; s >= 1; --s) {
    counts[s - 1] = i - cut[s][i];
    i = cut[s][i];
  }
  return counts;
}

namespace {

std::vector<int64_t> parse_counts(const std::string& text) {
  std::vector<int64_t> counts;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      const long long value = std::stoll(item, &used);
      if (used != item.size() || value < 1) throw std::invalid_argument(item);
      counts.push_back(value);
    } catch (const std::exception&) {
      fail("pipeline.partition: expected \"balanced\" or positive layer counts like \"3,3\", got '{}'",
           text);
    }
  }
  return counts;
}

}  // namespace

std::vector<StageRange> stage_ranges(const Config& config) {
  const int64_t layers = config.model.layers + 2;
  // With v chunks per worker the model is cut into p * v stages (interleaved schedule).
  const int64_t stages = config.pipeline.stages * config.pipeline.chunks;
  if (stages > layers) {
    fail("pipeline.stages x pipeline.chunks ({}) exceeds the model's {} layers (embedding + {} "
         "blocks + head)", stages, layers, config.model.layers);
  }
  std::vector<int64_t> counts;
  if (config.pipeline.partition == "balanced") {
    counts = balanced_layer_counts(gpt_layer_parameter_counts(config.model), stages);
  } else {
    counts = parse_counts(config.pipeline.partition);
    int64_t total = 0;
    for (int64_t c : counts) total += c;
    if (int64_t(counts.size()) != stages || total != layers) {
      fail("pipeline.partition '{}' must give {} counts summing to {} (embedding + {} blocks + "
           "head), got {} counts summing to {}",
           config.pipeline.partition, stages, layers, config.model.layers, counts.size(), total);
    }
  }
  std::vector<StageRange> ranges;
  int64_t first = 0;
  for (int64_t c : counts) {
    ranges.push_back({first, first + c});
    first += c;
  }
  return ranges;
}

bool recomputes_stage(const std::string& spec, int64_t stage, int64_t stages) {
  if (spec == "none") return false;
  if (spec == "all") return true;
  bool found = false;
  std::stringstream in(spec + ",");  // so "1," ends with an empty item, an error like ",1"
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    long long index = -1;
    try {
      index = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || index < 0 || index >= stages) {
      fail("pipeline.recompute: expected \"none\", \"all\" or stage indices 0..{} like \"0,1\", "
           "got '{}'", stages - 1, spec);
    }
    found = found || index == stage;
  }
  return found;
}

std::string describe_partition(const std::vector<StageRange>& ranges) {
  std::string out;
  for (size_t s = 0; s < ranges.size(); ++s) {
    out += fmt::format("{}stage {}: layers {}-{}", s ? ", " : "", s, ranges[s].first,
                       ranges[s].last - 1);
  }
  return out;
}

}  // namespace pipetrain::runtime
