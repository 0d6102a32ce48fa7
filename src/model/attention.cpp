#include "model/attention.h"

#include <vector>

namespace pipetrain {

torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, LayerKv* kv) {
  const int64_t length = q.size(2);
  const bool grouped = k.size(1) != q.size(1);
  auto keys = k, values = v;
  int64_t context = 0;
  if (kv != nullptr && kv->cached_slices() > 0) {
    context = kv->context();
    const auto cached = std::ptrdiff_t(kv->cached_slices());
    std::vector<torch::Tensor> all_keys(kv->key_leaves.begin(), kv->key_leaves.begin() + cached);
    std::vector<torch::Tensor> all_values(kv->value_leaves.begin(),
                                          kv->value_leaves.begin() + cached);
    all_keys.push_back(k);
    all_values.push_back(v);
    keys = torch::cat(all_keys, 2);
    values = torch::cat(all_values, 2);
  }
  // at::scaled_dot_product_attention picks the kernel: flash or memory-efficient on GPUs, the
  // fused flash kernel on CPU (float, bfloat16, float64 alike), never a [T, T] score tensor
  // kept for backward. A token slice's queries sit at positions context .. context + T - 1, so
  // its mask is bottom-right aligned; SDPA's is_causal is top-left, right only for context 0.
  torch::Tensor mixed;
  if (context == 0) {
    mixed = at::scaled_dot_product_attention(q, keys, values, {}, 0.0, /*is_causal=*/true,
                                             std::nullopt, grouped);
  } else {
    const auto visible =  // query i sees keys 0 .. context + i
        torch::ones({length, context + length}, torch::dtype(torch::kBool).device(q.device()))
            .tril(context);
    mixed = at::scaled_dot_product_attention(q, keys, values, visible, 0.0, false, std::nullopt,
                                             grouped);
  }
  if (kv != nullptr) kv->record(k, v);
  return mixed;
}

std::array<torch::Tensor, 3> split_qkv(const torch::Tensor& projected, int64_t heads) {
  const int64_t batch = projected.size(0), length = projected.size(1);
  const int64_t head_dim = projected.size(2) / (3 * heads);
  const auto qkv = projected.view({batch, length, 3, heads, head_dim}).unbind(2);
  return {qkv[0].transpose(1, 2), qkv[1].transpose(1, 2), qkv[2].transpose(1, 2)};
}

}  // namespace pipetrain
