#include "model/slice_cache.h"

namespace pipetrain {

int64_t LayerKv::context() const {
  int64_t tokens = 0;
  for (size_t i = 0; i < cached_slices(); ++i) tokens += key_leaves[i].size(2);
  return tokens;
}

void LayerKv::record(const torch::Tensor& key, const torch::Tensor& value) {
  if (replayed >= 0) {
    key_roots.at(size_t(replayed)) = key;
    value_roots.at(size_t(replayed)) = value;
    return;
  }
  key_roots.push_back(key);
  value_roots.push_back(value);
  key_leaves.push_back(key.detach().requires_grad_(true));
  value_leaves.push_back(value.detach().requires_grad_(true));
}

LayerKv& SequenceKvCache::layer(size_t index) {
  if (layers_.size() <= index) layers_.resize(index + 1);
  return layers_[index];
}

void SequenceKvCache::replay(int slice) {
  for (auto& kv : layers_) kv.replayed = slice;
}

void SequenceKvCache::add_backward_roots(int slice, std::vector<torch::Tensor>& roots,
                                         std::vector<torch::Tensor>& grads) const {
  const auto add = [&](const torch::Tensor& root, const torch::Tensor& leaf) {
    if (!leaf.grad().defined()) return;  // no later slice read it
    roots.push_back(root);
    grads.push_back(leaf.grad());
  };
  for (const auto& kv : layers_) {
    if (kv.key_roots.empty()) continue;  // a layer without attention
    add(kv.key_roots.at(size_t(slice)), kv.key_leaves.at(size_t(slice)));
    add(kv.value_roots.at(size_t(slice)), kv.value_leaves.at(size_t(slice)));
  }
}

}  // namespace pipetrain
