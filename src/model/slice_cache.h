#pragma once
// TeraPipe token slicing (REFERENCE.md section 3): the keys and values each attention layer
// produced for the earlier token slices of the same sequences.
//
// A slice's K/V enter the later slices as detached leaves, so a later slice's backward stops
// there and leaves the K/V gradient in the leaf's .grad (summed over every later slice). The
// slice's own backward then starts from its output and from its K/V inside its own graph, with
// those accumulated gradients: slices run backward in reverse, each handing its K/V gradient
// to the earlier ones, and every slice's graph is walked exactly once.
#include <cstddef>
#include <vector>

#include <torch/torch.h>

namespace pipetrain {

struct LayerKv {
  std::vector<torch::Tensor> key_leaves, value_leaves;  // [B, H, l_i, hd] per earlier slice
  std::vector<torch::Tensor> key_roots, value_roots;    // the same values inside slice i's graph
  // Recomputation: the slice whose forward runs again (its backward's), -1 when none. Its
  // context is the slices before it, and its K/V roots are replaced (the leaves, which the later
  // slices' backwards have added their gradients to, stay).
  int replayed = -1;
  int64_t context() const;  // tokens cached so far (before the replayed slice)
  // Records a slice's K/V: appended, or the replayed slice's roots.
  void record(const torch::Tensor& key, const torch::Tensor& value);
  size_t cached_slices() const { return replayed >= 0 ? size_t(replayed) : key_leaves.size(); }
};

class SequenceKvCache {
 public:
  LayerKv& layer(size_t index);  // the index-th attention layer of a stack, created on first use
  // A recomputed slice's forward runs again in its backward (`slice`; -1: done) on the same
  // cache: see LayerKv::replayed.
  void replay(int slice);
  // Appends to `roots`/`grads` what the backward of `slice` starts from besides its output: its
  // K/V in its own graph with the gradients the later slices accumulated (none for the last).
  void add_backward_roots(int slice, std::vector<torch::Tensor>& roots,
                          std::vector<torch::Tensor>& grads) const;

 private:
  std::vector<LayerKv> layers_;
};

// A recomputed slice's forward, replayed on its sequence's cache for the guard's lifetime (none
// when unsliced: null).
class ReplayedSlice {
 public:
  ReplayedSlice(SequenceKvCache* cache, int slice) : cache_(cache) {
    if (cache_ != nullptr) cache_->replay(slice);
  }
  ~ReplayedSlice() {
    if (cache_ != nullptr) cache_->replay(-1);
  }
  ReplayedSlice(const ReplayedSlice&) = delete;
  ReplayedSlice& operator=(const ReplayedSlice&) = delete;

 private:
  SequenceKvCache* cache_;
};

}  // namespace pipetrain
