#pragma once
// Causal self-attention shared by the decoder blocks (GPT-2's and Llama's), with TeraPipe's
// token-slice cache (model/slice_cache.h).
#include <torch/torch.h>

#include "model/slice_cache.h"

namespace pipetrain {

// Queries q [B, H, T, hd] attend causally over keys/values k, v [B, KV, T, hd] (KV divides H:
// grouped-query attention, each key/value head serving H / KV query heads) -> [B, H, T, hd].
// With `kv`, the T tokens follow kv->context() earlier ones of the same sequences: the queries
// also see the cached keys/values, and k, v are appended (as leaves for the later slices).
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, LayerKv* kv);

}  // namespace pipetrain
