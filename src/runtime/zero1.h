#pragma once
// ZeRO-1: the optimizer state of a stage sharded across its w data-parallel replicas.
//
// The worker's parameters are re-seated as views of one flat buffer, padded to w equal shards
// of S = ceil(N / w) elements; replica r owns elements [r S, (r + 1) S). The gradients arrive
// already summed over the replicas and clipped (the executor's all-reduce and global norm are
// unchanged, so they are bit for bit the unsharded ones); step() copies this replica's slice of
// them, steps an ordinary optimizer over the shard alone (SGD-momentum, Adam and AdamW are
// element-wise, so a shard's update equals the unsharded update of those elements and the state
// is 1/w of it), then all-gathers the shards into every replica's weights. Padding elements
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
  // `params`: every parameter of the worker, in the same order on every replica.
  Zero1Optimizer(const std::vector<torch::Tensor>& params, const TrainConfig& train, Comm& comm,
                 int replica_group, int replica, int replicas);
  void zero_grad();  // the parameters' (full) gradients
  void step(double lr);
  torch::optim::Optimizer& shard_optimizer() { return *optimizer_; }
  // The module's optimizer state named as optimizer_state_tensors() names it, assembled from
  // every replica's shard. A collective over the replica group: every replica calls it.
  std::vector<std::pair<std::string, torch::Tensor>> state_tensors(torch::nn::Module& module);

 private:
  torch::Tensor gather(const torch::Tensor& shard_state);  // [w S] from every replica's [S]

  Comm& comm_;
  int group_, replica_, replicas_;
  std::vector<torch::Tensor> params_;
  std::map<const void*, int64_t> offset_of_;  // parameter (TensorImpl) -> offset in flat_
  torch::Tensor flat_;   // [w S]: every parameter is a view into it
  torch::Tensor shard_;  // flat_[r S, (r + 1) S): what this replica's optimizer updates
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
};

}  // namespace pipetrain::runtime
