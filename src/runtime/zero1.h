#pragma once
// ZeRO-1: the optimizer state of a stage sharded across its w data-parallel replicas.
//
// The worker's parameters are laid out (in order) in one flat index space, padded to w equal
// shards of S = ceil(N / w) elements; replica r owns elements [r S, (r + 1) S). The gradients
// arrive already summed over the replicas and clipped (the executor's all-reduce and global norm
// are unchanged, so they are bit for bit the unsharded ones); step() copies this replica's slice
// of the weights and gradients into its shard, steps an ordinary optimizer over the shard alone
// (SGD-momentum, Adam and AdamW are element-wise, so a shard's update equals the unsharded update
// of those elements and the state is 1/w of it), then all-gathers the shards and copies them
// into every replica's parameters in place. The parameters keep their own storage, so a no-flush
// policy's masters may move to a fresh copy (copy on write) between updates. Padding elements
// have zero weight and zero gradient, so every update leaves them zero.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "core/config.h"
#include "runtime/comm.h"

namespace pipetrain::runtime {

class Zero1Optimizer {
 public:
  using Named = std::vector<std::pair<std::string, torch::Tensor>>;
  // `params`: every parameter of the worker, in the same order on every replica.
  Zero1Optimizer(const std::vector<torch::Tensor>& params, const TrainConfig& train, Comm& comm,
                 int replica_group, int replica, int replicas);
  void zero_grad();  // the parameters' (full) gradients
  void step(double lr);
  torch::optim::Optimizer& shard_optimizer() { return *optimizer_; }
  // The optimizer state of `params` (named tensors among the constructor's) named as
  // optimizer_state_tensors() names it, assembled from every replica's shard. A collective over
  // the replica group: every replica calls it.
  Named state_tensors(const Named& params);
  // The inverse: every parameter's whole state (named as state_tensors names it, e.g. from a
  // checkpoint of any width), of which this replica keeps its shard. `params` must cover the
  // constructor's.
  void load_state(const Named& params, const Named& state);

 private:
  torch::Tensor gather(const torch::Tensor& shard_state);  // [w S] from every replica's [S]
  int64_t shard_begin() const { return replica_ * shard_.numel(); }

  Comm& comm_;
  int group_, replica_, replicas_;
  std::vector<torch::Tensor> params_;
  std::map<const void*, int64_t> offset_of_;  // parameter (TensorImpl) -> offset in the flat space
  torch::Tensor shard_;  // [S]: this replica's elements, what its optimizer updates
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace pipetrain::runtime
