#pragma once
// Causal self-attention shared by the decoder blocks (GPT-2's and Llama's), with TeraPipe's
// token-slice cache (model/slice_cache.h).
#include <array>

#include <torch/torch.h>

#include "model/slice_cache.h"

namespace pipetrain {

// Queries q [B, H, T, hd] attend causally over keys/values k, v [B, KV, T, hd] (KV divides H:
// grouped-query attention, each key/value head serving H / KV query heads) -> [B, H, T, hd].
// With `kv`, the T tokens follow kv->context() earlier ones of the same sequences: the queries
// also see the cached keys/values, and k, v are appended (as leaves for the later slices).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, LayerKv* kv);

// A fused q/k/v projection's output [B, T, 3 H hd] as q, k and v, each head-major [B, H, T, hd]
// (views). One unbind, not three selects: its backward stacks the three gradients in one kernel
// in the projection's own layout, where each select's would fill a zero tensor of the whole
// projection, the three be added and the sum copied back from the heads' order.
std::array<torch::Tensor, 3> split_qkv(const torch::Tensor& projected, int64_t heads);

}  // namespace pipetrain
