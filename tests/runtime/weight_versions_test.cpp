// The weight policy objects on one worker's action list, without processes: every compute action
// reads the weights its schedule names, and the optimizer updates what the policy says.
#include <gtest/gtest.h>

#include <stdexcept>

#include "runtime/weight_versions.h"
#include "schedule/generators.h"
#include "schedule/steps.h"
#include "train/prediction.h"

namespace pipetrain::runtime {
namespace {

schedule::Schedule schedule_of(const std::string& name, int stages, int microbatches, int iterations) {
  schedule::ScheduleSpec spec;
  spec.name = name;
  spec.stages = stages, spec.microbatches = microbatches, spec.iterations = iterations;
  return schedule::make_schedule(spec);
}

// The policy of worker 0's only chunk, its readers counted over the whole list at once.
std::unique_ptr<WeightVersions> weights_of(const schedule::Schedule& s, const torch::Tensor& param) {
  auto weights = make_weight_versions(s.policy, s.iterations, 0, {param});
  weights->count_readers(s.actions.at(0));
  return weights;
}

torch::Tensor parameter(double value) {
  return torch::full({3}, value, torch::kFloat64).requires_grad_(true);
}

double value_of(const torch::Tensor& t) { return t.detach()[0].item<double>(); }

TEST(WeightVersions, SyncUpdatesTheModuleParametersThemselves) {
  const auto param = parameter(1.0);
  auto weights = weights_of(schedule_of("1f1b", 1, 2, 1), param);
  ASSERT_EQ(weights->optimized().size(), 1u);
  EXPECT_TRUE(weights->optimized()[0].is_same(param));
  EXPECT_TRUE(weights->held_tensors().empty());
  EXPECT_EQ(weights->peak_copies(), 1);
  EXPECT_THROW(weights->stashed(0), std::logic_error);
}

// Runs worker 0's actions of a one-stage no-flush schedule: every backward adds a gradient of 1
// and plain SGD (learning rate 1) steps after each group. Records, per compute action, the
// version it names and the weight value it saw.
struct OneStageRun {
  std::vector<std::pair<int, double>> seen;
  int peak_copies = 0;
};

OneStageRun run_one_stage(const schedule::Schedule& s) {
  const auto param = parameter(10.0);
  auto weights = weights_of(s, param);
  torch::optim::SGD sgd(weights->optimized(), torch::optim::SGDOptions(1.0));
  OneStageRun run;
  for (const auto& a : s.actions.at(0)) {
    if (a.kind == schedule::ActionKind::OptimizerStep) {
      weights->before_step();
      sgd.step();
      weights->after_step(sgd);
    }
    if (!schedule::is_compute(a.kind)) continue;
    weights->before_compute(a, sgd);
    run.seen.emplace_back(a.version, value_of(param));
    if (a.kind == schedule::ActionKind::Backward) {
      param.mutable_grad() = param.grad().defined() ? param.grad() + 1 : torch::ones_like(param);
    }
    weights->after_compute(a);
  }
  run.peak_copies = weights->peak_copies();
  return run;
}

TEST(WeightVersions, TwoBwActionsReadTheStashedVersionTheirScheduleNames) {
  const auto s = schedule_of("2bw", 1, 2, 4);
  const OneStageRun run = run_one_stage(s);
  ASSERT_EQ(run.seen.size(), 16u);  // 4 iterations x 2 microbatches x (forward, backward)
  // Version v is 10 - 2v (two microbatches' gradients per update), read while the masters are
  // already one update further: two copies.
  for (const auto& [version, value] : run.seen) EXPECT_EQ(value, 10.0 - 2.0 * version);
  EXPECT_EQ(run.seen.back().first, 2);  // group 3 reads version 2
  EXPECT_EQ(run.peak_copies, 2);
}

TEST(WeightVersions, PipeDreamReadsTheVersionOfEachUpdate) {
  const OneStageRun run = run_one_stage(schedule_of("pipedream", 1, 2, 2));
  ASSERT_EQ(run.seen.size(), 8u);
  for (const auto& [version, value] : run.seen) EXPECT_EQ(value, 10.0 - version);
  EXPECT_EQ(run.seen.back().first, 3);  // one update per microbatch
}

// In a step a checkpoint may follow, a forward that runs ahead of it (F1 in step 0, F2 in step
// 1, ...) keeps a copy of the weights it read until the next step begins; in other steps it
// keeps none (PipeOptim's 2 copies).
TEST(WeightVersions, PredictionIsAppliedForTheForwardAndUndoneAfterIt) {
  // Worker 0 of a 2-stage PipeOptim forward-predicts D - r - 1 = 1 update ahead.
  const auto s = schedule_of("pipeoptim", 2, 1, 4);
  ASSERT_EQ(s.policy.forward_staleness.at(0), 1);
  for (const bool checkpoint_may_follow : {true, false}) {
    SCOPED_TRACE(checkpoint_may_follow ? "a checkpoint may follow every step" : "no checkpoint");
    const auto param = parameter(10.0);
    auto weights = weights_of(s, param);
    const torch::Tensor master = weights->optimized().at(0);
    EXPECT_FALSE(master.is_same(param));  // graphs never read the optimizer's tensor directly
    torch::optim::SGD sgd(weights->optimized(), torch::optim::SGDOptions(0.5).momentum(0.9));
    const auto bounds = schedule::step_bounds(s, 0, 0);
    int predicted_forwards = 0, ahead_forwards = 0;
    int64_t step = 0;
    for (size_t i = 0; i < s.actions.at(0).size(); ++i) {
      const auto& a = s.actions.at(0)[i];
      while (size_t(step) < bounds.size() && bounds[size_t(step)].first == i) {
        weights->begin_step(step++, checkpoint_may_follow);
      }
      if (a.kind == schedule::ActionKind::OptimizerStep) {
        weights->before_step();
        sgd.step();
        weights->after_step(sgd);
      }
      if (!schedule::is_compute(a.kind)) continue;
      const torch::Tensor latest = master.detach().clone();
      const torch::Tensor direction =
          prediction_direction(sgd, master, PredictionKind::OptimizerUpdate);
      weights->before_compute(a, sgd);
      const bool ahead = a.kind == schedule::ActionKind::Forward && a.iteration >= step;
      if (ahead && checkpoint_may_follow) {
        EXPECT_TRUE(torch::equal(weights->stashed(a.version).at(0), param.detach()));
        ++ahead_forwards;
      }
      if (a.kind == schedule::ActionKind::Forward && direction.defined()) {
        EXPECT_TRUE(torch::equal(param.detach(), latest - 0.5 * direction));
        // view, master, the saved original (and the copy of a forward ahead of its step)
        EXPECT_EQ(weights->held_tensors().size(), ahead && checkpoint_may_follow ? 4u : 3u);
        ++predicted_forwards;
      } else {
        EXPECT_TRUE(torch::equal(param.detach(), latest));  // the backward reads the live weights
      }
      if (a.kind == schedule::ActionKind::Backward) param.mutable_grad() = torch::ones_like(param);
      weights->after_compute(a);
      EXPECT_TRUE(torch::equal(master.detach(), latest)) << "the prediction was not undone";
    }
    EXPECT_EQ(predicted_forwards, 2);  // the forwards after the first update: F2, F3
    EXPECT_EQ(ahead_forwards, checkpoint_may_follow ? 3 : 0);  // F1, F2, F3 run a step early
    EXPECT_EQ(weights->peak_copies(), checkpoint_may_follow ? 3 : 2);
    EXPECT_EQ(weights->keeps_checkpoint_state(), checkpoint_may_follow);
  }
}

}  // namespace
}  // namespace pipetrain::runtime
