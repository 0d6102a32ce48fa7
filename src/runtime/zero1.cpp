#include "runtime/zero1.h"

#include "model/state_io.h"
#include "train/optim.h"

namespace pipetrain::runtime {
namespace {

const std::string kShardName = "flat";  // the shard's name in its optimizer's named state

}  // namespace

Zero1Optimizer::Zero1Optimizer(const std::vector<torch::Tensor>& params, const TrainConfig& train,
                               Comm& comm, int replica_group, int replica, int replicas)
    : comm_(comm), group_(replica_group), replica_(replica), replicas_(replicas), params_(params) {
  int64_t total = 0;
  for (const auto& p : params_) {
    offset_of_[p.unsafeGetTensorImpl()] = total;
    total += p.numel();
  }
  const int64_t shard = (total + replicas - 1) / replicas;
  // A leaf the optimizer owns; its values are this replica's slice of the weights (step()).
  shard_ = torch::zeros({shard}, params_.at(0).options());
  optimizer_ = make_optimizer({shard_}, train);
}

void Zero1Optimizer::zero_grad() {
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().detach_().zero_();
  }
}

void Zero1Optimizer::step(double lr) {
  torch::NoGradGuard no_grad;
  const int64_t begin = shard_begin(), end = begin + shard_.numel();
  // This replica's slice of the weights and of the (summed, clipped) gradients; padding zero.
  auto grad = torch::zeros_like(shard_);
  for (const auto& p : params_) {
    const int64_t offset = offset_of_.at(p.unsafeGetTensorImpl());
    const int64_t from = std::max(begin, offset), to = std::min(end, offset + p.numel());
    if (from >= to) continue;
    shard_.slice(0, from - begin, to - begin).copy_(p.reshape({-1}).slice(0, from - offset, to - offset));
    if (!p.grad().defined()) continue;
    grad.slice(0, from - begin, to - begin).copy_(p.grad().reshape({-1}).slice(0, from - offset, to - offset));
  }
  shard_.mutable_grad() = grad;
  set_learning_rate(*optimizer_, lr);
  optimizer_->step();
  shard_.mutable_grad() = torch::Tensor();  // transient: gradients stay full-size on p.grad()
  const torch::Tensor flat = gather(shard_);
  for (auto& p : params_) {
    const int64_t offset = offset_of_.at(p.unsafeGetTensorImpl());
    p.copy_(flat.slice(0, offset, offset + p.numel()).view_as(p));
  }
}

torch::Tensor Zero1Optimizer::gather(const torch::Tensor& shard_state) {
  auto full = torch::empty({shard_.numel() * replicas_}, shard_state.options());
  std::vector<torch::Tensor> parts = full.chunk(replicas_);
  comm_.all_gather(shard_state, parts, group_);
  return full;
}

Zero1Optimizer::Named Zero1Optimizer::state_tensors(const Named& params) {
  // The shard's state under the same names a per-parameter optimizer uses ("<name>.exp_avg").
  const auto shard_state = optimizer_state_tensors(*optimizer_, Named{{kShardName, shard_}});
  Named out;
  for (const auto& [name, state] : shard_state) {
    const std::string suffix = name.substr(kShardName.size());  // ".exp_avg", ".step"
    const bool per_element = state.dim() == 1 && state.numel() == shard_.numel();
    const torch::Tensor full = per_element ? gather(state) : state;
    for (const auto& [param_name, p] : params) {
      if (!per_element) {
        out.emplace_back(param_name + suffix, state.clone());  // e.g. Adam's step count
        continue;
      }
      const int64_t offset = offset_of_.at(p.unsafeGetTensorImpl());
      out.emplace_back(param_name + suffix, full.slice(0, offset, offset + p.numel()).view_as(p).clone());
    }
  }
  return out;
}

void Zero1Optimizer::load_state(const Named& params, const Named& state) {
  std::map<std::string, torch::Tensor> by_name(state.begin(), state.end());
  std::map<std::string, torch::Tensor> flat;  // suffix -> [w S], or a step count as it is
  for (const auto& [param_name, p] : params) {
    const int64_t offset = offset_of_.at(p.unsafeGetTensorImpl());
    for (auto it = by_name.lower_bound(param_name + "."); it != by_name.end(); ++it) {
      if (it->first.rfind(param_name + ".", 0) != 0) break;
      const std::string suffix = it->first.substr(param_name.size());
      if (suffix.find('.', 1) != std::string::npos) continue;  // another parameter's ("a.b.c")
      const torch::Tensor& value = it->second;
      if (value.sizes() != p.sizes()) {  // a step count: the same for every parameter
        flat[suffix] = value;
        continue;
      }
      torch::Tensor& whole = flat[suffix];
      if (!whole.defined()) whole = torch::zeros({shard_.numel() * replicas_}, value.options());
      whole.slice(0, offset, offset + p.numel()).copy_(value.reshape({-1}));
    }
  }
  std::vector<TensorEntry> entries;
  for (const auto& [suffix, whole] : flat) {
    const bool per_element = whole.dim() == 1 && whole.numel() == shard_.numel() * replicas_;
    entries.push_back(to_entry(kShardName + suffix,
                               per_element ? whole.slice(0, shard_begin(), shard_begin() + shard_.numel())
                                           : whole));
  }
  load_optimizer_state(*optimizer_, Named{{kShardName, shard_}}, entries, "ZeRO-1 shard");
}

}  // namespace pipetrain::runtime
