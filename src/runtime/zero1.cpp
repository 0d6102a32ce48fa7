#include "runtime/zero1.h"

#include "train/optim.h"

namespace pipetrain::runtime {

Zero1Optimizer::Zero1Optimizer(const std::vector<torch::Tensor>& params, const TrainConfig& train,
                               Comm& comm, int replica_group, int replica, int replicas)
    : comm_(comm), group_(replica_group), replica_(replica), replicas_(replicas), params_(params) {
  int64_t total = 0;
  for (const auto& p : params_) total += p.numel();
  const int64_t shard = (total + replicas - 1) / replicas;
  flat_ = torch::zeros({shard * replicas}, torch::dtype(params_.at(0).scalar_type()));
  torch::NoGradGuard no_grad;
  int64_t offset = 0;
  for (auto& p : params_) {
    auto view = flat_.slice(0, offset, offset + p.numel()).view_as(p);
    view.copy_(p);
    p.set_(view);  // the module's parameter now lives in flat_ (same tensor, new storage)
    offset_of_[p.unsafeGetTensorImpl()] = offset;
    offset += p.numel();
  }
  // detach(): a leaf the optimizer can own, sharing flat_'s storage.
  shard_ = flat_.slice(0, replica * shard, (replica + 1) * shard).detach();
  optimizer_ = make_optimizer({shard_}, train);
}

void Zero1Optimizer::zero_grad() {
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().detach_().zero_();
  }
}

void Zero1Optimizer::step(double lr) {
  torch::NoGradGuard no_grad;
  const int64_t begin = replica_ * shard_.numel(), end = begin + shard_.numel();
  // This replica's slice of the (summed, clipped) gradients; padding stays zero.
  auto grad = torch::zeros_like(shard_);
  for (const auto& p : params_) {
    const int64_t offset = offset_of_.at(p.unsafeGetTensorImpl());
    const int64_t from = std::max(begin, offset), to = std::min(end, offset + p.numel());
    if (from >= to || !p.grad().defined()) continue;
    grad.slice(0, from - begin, to - begin).copy_(p.grad().reshape({-1}).slice(0, from - offset, to - offset));
  }
  shard_.mutable_grad() = grad;
  set_learning_rate(*optimizer_, lr);
  optimizer_->step();
  shard_.mutable_grad() = torch::Tensor();  // transient: gradients stay full-size on p.grad()
  std::vector<torch::Tensor> shards = flat_.chunk(replicas_);
  comm_.all_gather(shard_, shards, group_);
}

torch::Tensor Zero1Optimizer::gather(const torch::Tensor& shard_state) {
  auto full = torch::empty({shard_.numel() * replicas_}, shard_state.options());
  std::vector<torch::Tensor> parts = full.chunk(replicas_);
  comm_.all_gather(shard_state, parts, group_);
  return full;
}

std::vector<std::pair<std::string, torch::Tensor>> Zero1Optimizer::state_tensors(
    torch::nn::Module& module) {
  // The shard's state under the same names a per-parameter optimizer uses ("<name>.exp_avg").
  torch::nn::Module holder;
  holder.register_parameter("flat", shard_, /*requires_grad=*/false);
  const auto shard_state = optimizer_state_tensors(*optimizer_, holder);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, state] : shard_state) {
    const std::string suffix = name.substr(std::string("flat").size());  // ".exp_avg", ".step"
    const bool per_element = state.dim() == 1 && state.numel() == shard_.numel();
    const torch::Tensor full = per_element ? gather(state) : state;
    for (const auto& item : module.named_parameters()) {
      const auto& p = item.value();
      if (!per_element) {
        out.emplace_back(item.key() + suffix, state.clone());  // e.g. Adam's step count
        continue;
      }
      const int64_t offset = offset_of_.at(p.unsafeGetTensorImpl());
      out.emplace_back(item.key() + suffix, full.slice(0, offset, offset + p.numel()).view_as(p).clone());
    }
  }
  return out;
}

}  // namespace pipetrain::runtime
