#include "model/slice_cache.h"

namespace pipetrain {

int64_t LayerKv::context() const {
  int64_t tokens = 0;
  for (const auto& k : key_leaves) tokens += k.size(2);
  return tokens;
}

LayerKv& SequenceKvCache::layer(size_t index) {
  if (layers_.size() <= index) layers_.resize(index + 1);
  return layers_[index];
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
