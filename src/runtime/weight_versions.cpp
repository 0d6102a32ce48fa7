#include "runtime/weight_versions.h"

#include <stdexcept>

#include <fmt/format.h>

#include "runtime/weight_policies.h"

namespace pipetrain::runtime {
namespace {

using schedule::WeightPolicyKind;

// Flushing schedules: every action reads the module's parameters, which the optimizer updates.
class SyncWeights : public WeightVersions {
 public:
  explicit SyncWeights(std::vector<torch::Tensor> params) : params_(std::move(params)) {}
  const std::vector<torch::Tensor>& optimized() const override { return params_; }

 private:
  std::vector<torch::Tensor> params_;
};

}  // namespace

const std::vector<torch::Tensor>& WeightVersions::stashed(int version) const {
  throw std::logic_error(fmt::format("this weight policy stashes no version {}", version));
}

void WeightVersions::resume(const std::vector<schedule::Action>&, int,
                            std::map<int, std::vector<torch::Tensor>>) {
  throw std::logic_error("this weight policy cannot resume mid-run");
}

std::unique_ptr<WeightVersions> make_weight_versions(const schedule::WeightPolicy& policy,
                                                     int iterations, int stage,
                                                     std::vector<torch::Tensor> params,
                                                     std::vector<int> continued_versions) {
  switch (policy.kind) {
    case WeightPolicyKind::Sync:
      return std::make_unique<SyncWeights>(std::move(params));
    case WeightPolicyKind::DoubleBuffer:
    case WeightPolicyKind::Stash: {
      StashedWeights::Options options{policy.kind == WeightPolicyKind::DoubleBuffer,
                                      policy.predict_ahead, {}};
      if (policy.kind == WeightPolicyKind::Stash) options.continued_versions = std::move(continued_versions);
      return std::make_unique<StashedWeights>(iterations, stage, options, std::move(params));
    }
    case WeightPolicyKind::Predicted: {
      const auto ahead = [&](const std::vector<int>& staleness) {
        return staleness.empty() ? 0 : staleness.at(size_t(stage));
      };
      // SpecTrain (the only policy that also predicts its backward) extrapolates with momentum.
      const auto kind = policy.predict_backward ? PredictionKind::MomentumOnly
                                                : PredictionKind::OptimizerUpdate;
      return std::make_unique<PredictedWeights>(
          ahead(policy.forward_staleness),
          policy.predict_backward ? ahead(policy.backward_staleness) : 0, kind, std::move(params),
          std::move(continued_versions));
    }
  }
  throw std::logic_error("unknown weight policy");
}

MasterWeights::MasterWeights(std::vector<torch::Tensor> params) : views_(std::move(params)) {
  for (const auto& p : views_) masters_.push_back(p.variable_data().requires_grad_(true));
}

void MasterWeights::fix_addresses() {
  fixed_addresses_ = true;
  if (!views_follow_versions()) return;  // (the views are the masters' storage, which stays)
  for (auto& view : views_) view.set_data(view.variable_data().clone());
}

void MasterWeights::point_views_at(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < views_.size(); ++i) {
    if (!fixed_addresses_) {
      views_[i].set_data(tensors[i]);
    } else if (views_[i].data_ptr() != tensors[i].data_ptr()) {
      views_[i].variable_data().copy_(tensors[i]);  // (its own counter: no version bump)
    }
  }
}

void MasterWeights::release_views() {
  if (!fixed_addresses_) point_views_at(masters_);
}

// Fixed addresses: a copy, and the views' gradients zeroed where they are (the run-on's
// backwards, graphed, add there while the update still reads the masters').
void MasterWeights::move_gradients_to_masters() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < views_.size(); ++i) {
    const torch::Tensor grad = views_[i].grad();
    if (fixed_addresses_ && grad.defined()) {
      masters_[i].mutable_grad() = grad.clone();
      views_[i].mutable_grad().zero_();
    } else {
      masters_[i].mutable_grad() = grad;
      views_[i].mutable_grad() = torch::Tensor();
    }
  }
}

void MasterWeights::finish_update() {
  for (auto& m : masters_) m.mutable_grad() = torch::Tensor();
  ++master_version_;
}

void MasterWeights::note_peak() { peak_copies_ = std::max(peak_copies_, live_copies()); }

std::vector<torch::Tensor> MasterWeights::held_tensors() const {
  std::vector<torch::Tensor> held = views_;
  held.insert(held.end(), masters_.begin(), masters_.end());
  return held;
}

}  // namespace pipetrain::runtime
