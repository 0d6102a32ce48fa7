#pragma once
// Analytic profile of a GPT too large to run here: per-layer time from FLOPs and the cluster's
// sustained FLOP/s at the microbatch's token count, memory from the layer shapes (mixed-precision Adam), p2p bytes per boundary.
#include <cstdint>
#include <string>
#include <vector>

#include "plan/cluster.h"
#include "plan/partition.h"

namespace pipetrain::plan {

struct GptShape {
  std::string name;
  int64_t layers = 0, hidden = 0, heads = 0, seq_len = 0, vocab = 50257;
  double parameters() const;  // embedding (tied head) + positions + blocks + final norm
};

// Known shapes: the model presets (gpt2-small ... gpt2-xl, core/model_presets.h), gpt-355m, gpt-2.2b, gpt-3.9b (PipeDream-2BW), gpt3-1b, gpt3-13b, gpt3-44b,
// gpt3-175b (TeraPipe). UserError listing them for an unknown name.
GptShape find_gpt_shape(const std::string& name);
const std::vector<GptShape>& known_gpt_shapes();

// Training FLOPs of one block for one microbatch of `batch` sequences (forward only):
// 24 b s h^2 (the four matmuls) + 4 b s^2 h (scores and mixing).
double block_forward_flops(const GptShape& shape, int64_t batch);
double head_forward_flops(const GptShape& shape, int64_t batch);  // 2 b s h V

struct AnalyticOptions {
  int64_t microbatch = 1;
  bool recompute = false;  // keep only each block's input; recompute the forward in backward
};

// [embedding, block 0..L-1, head] costs for one microbatch on one device of `cluster`. The weight
// gradient of a matmul costs its forward (the backward's other half is the input gradient).
// Memory per parameter: bytes_per_value per weight version + gradient (bytes_per_value) +
// fp32 master weights, Adam m and v (12 bytes) when bytes_per_value < 4, else m and v (8).
std::vector<LayerCost> analytic_gpt_layers(const GptShape& shape, const ClusterSpec& cluster,
                                           const AnalyticOptions& options);

// Activation bytes one block stashes for a microbatch of `microbatch` sequences (Korthikanti
// et al. 2022: s b h (34 + 5 a s / h) at 16 bits, scaled to bytes_per_value), and the head's
// (fp32 logits and their gradient, plus its input and output gradient).
double block_activation_bytes(const GptShape& shape, double microbatch, double bytes_per_value);
double head_activation_bytes(const GptShape& shape, double microbatch, double bytes_per_value);

// With recomputation (every layer keeps only its input), one layer's full activations exist while
// it is recomputed: a fixed extra per stage (StageLimits::extra_bytes). 0 without recomputation.
double recompute_workspace_bytes(const GptShape& shape, const ClusterSpec& cluster,
                                 const AnalyticOptions& options);

}  // namespace pipetrain::plan
