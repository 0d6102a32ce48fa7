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

void MasterWeights::point_views_at(const std::vector<torch::Tensor>& tensors) {
  for (size_t i = 0; i < views_.size(); ++i) views_[i].set_data(tensors[i]);
}

void MasterWeights::move_gradients_to_masters() {
  for (size_t i = 0; i < views_.size(); ++i) {
    masters_[i].mutable_grad() = views_[i].grad();
    views_[i].mutable_grad() = torch::Tensor();
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
