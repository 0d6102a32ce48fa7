// Hand-broken schedules are rejected with a message that names the problem and the action.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "schedule/generators.h"
#include "schedule/validate.h"

namespace pipetrain::schedule {
namespace {

Schedule one_f_one_b(int p, int m) {
  ScheduleSpec spec;
  spec.name = "1f1b";
  spec.stages = p;
  spec.microbatches = m;
  return make_schedule(spec);
}

size_t find(const std::vector<Action>& list, ActionKind kind, int microbatch) {
  for (size_t k = 0; k < list.size(); ++k)
    if (list[k].kind == kind && list[k].microbatch == microbatch) return k;
  ADD_FAILURE() << "action not found";
  return 0;
}

void expect_rejected(const Schedule& s, std::initializer_list<const char*> fragments) {
  Validation v = validate(s);
  ASSERT_FALSE(v.ok);
  for (const char* fragment : fragments)
    EXPECT_NE(v.error.find(fragment), std::string::npos) << "missing '" << fragment << "' in:\n"
                                                         << v.error;
  EXPECT_THROW(validate_or_throw(s), UserError);
}

TEST(Validator, AcceptsGenerated) { EXPECT_TRUE(validate(one_f_one_b(4, 8)).ok); }

TEST(Validator, MissingRecv) {
  Schedule s = one_f_one_b(2, 2);
  auto& w1 = s.actions[1];
  w1.erase(w1.begin() + find(w1, ActionKind::RecvActivation, 1));
  expect_rejected(s, {"worker 0, position", "(0SA1)", "has no matching recv", "missing recv",
                      ">>0SA1<<", "w1:"});
}

TEST(Validator, BackwardBeforeForward) {
  Schedule s = one_f_one_b(3, 4);
  auto& last = s.actions[2];
  std::swap(last[find(last, ActionKind::Forward, 2)], last[find(last, ActionKind::Backward, 2)]);
  expect_rejected(s, {"worker 2, position", "(2B2)", "Backward of stage 2 microbatch 2 runs "
                      "before its Forward", ">>2B2<<"});
}

// The classic blocking-send trap: each side sends first, neither reaches its recv.
TEST(Validator, CyclicWait) {
  Schedule s;
  s.name = "hand";
  s.workers = 2;
  s.microbatches = 2;
  auto A = [](ActionKind kind, int mb, int version, int peer = -1) {
    return Action{kind, 0, mb, 0, 0, version, peer};
  };
  using K = ActionKind;
  s.actions = {
      {A(K::Forward, 0, 0), A(K::SendActivation, 0, -1, 1), A(K::Forward, 1, 0),
       A(K::SendActivation, 1, -1, 1), A(K::RecvGrad, 0, -1, 1), A(K::Backward, 0, 0),
       A(K::RecvGrad, 1, -1, 1), A(K::Backward, 1, 0), A(K::OptimizerStep, 0, 1)},
      {A(K::RecvActivation, 0, -1, 0), A(K::Forward, 0, 0), A(K::Backward, 0, 0),
       A(K::SendGrad, 0, -1, 0), A(K::RecvActivation, 1, -1, 0), A(K::Forward, 1, 0),
       A(K::Backward, 1, 0), A(K::SendGrad, 1, -1, 0), A(K::OptimizerStep, 0, 1)},
  };
  expect_rejected(s, {"deadlock", "cyclic wait", "worker 0 at position 3 (0SA1) waits for "
                      "worker 1", "worker 1 at position 3 (1SG0) waits for worker 0"});
  // Receiving first on worker 1 breaks the cycle.
  s.actions[1] = {A(K::RecvActivation, 0, -1, 0), A(K::Forward, 0, 0), A(K::Backward, 0, 0),
                  A(K::RecvActivation, 1, -1, 0), A(K::SendGrad, 0, -1, 0), A(K::Forward, 1, 0),
                  A(K::Backward, 1, 0), A(K::SendGrad, 1, -1, 0), A(K::OptimizerStep, 0, 1)};
  EXPECT_TRUE(validate(s).ok) << validate(s).error;
}

TEST(Validator, TwoBwWithFewerMicrobatchesThanStages) {
  ScheduleSpec spec;
  spec.name = "2bw";
  spec.stages = 4;
  spec.microbatches = 2;
  spec.iterations = 4;
  Schedule s = make_async_1f1b_schedule(spec, WeightPolicyKind::DoubleBuffer);
  expect_rejected(s, {"2BW needs microbatches >= stages", "m=2 < d=4"});
}

TEST(Validator, VersionRules) {
  ScheduleSpec spec;
  spec.name = "2bw";
  spec.stages = 3;
  spec.microbatches = 3;
  spec.iterations = 3;
  Schedule s = make_schedule(spec);
  auto& w0 = s.actions[0];
  for (Action& a : w0)  // backward of microbatch 4 (group 1) reads another version
    if (a.kind == ActionKind::Backward && a.iteration == 1 && a.microbatch == 1) a.version = 1;
  expect_rejected(s, {"reads weight version 1", "2BW group 1 reads version 0"});

  spec.name = "pipedream";
  Schedule stash = make_schedule(spec);
  for (Action& a : stash.actions[0])
    if (a.kind == ActionKind::Backward && a.iteration == 2 && a.microbatch == 0) a.version += 1;
  expect_rejected(stash, {"but its forward read version"});
}

TEST(Validator, SendToTheWrongWorker) {
  Schedule s = one_f_one_b(3, 2);
  for (Action& a : s.actions[0])
    if (a.kind == ActionKind::SendActivation) a.peer = 2;
  expect_rejected(s, {"peer 2 is not the worker of stage 1"});
}

TEST(Validator, MissingBackward) {
  Schedule s = one_f_one_b(2, 2);
  auto& w0 = s.actions[0];
  w0.erase(w0.begin() + find(w0, ActionKind::Backward, 1));
  expect_rejected(s, {"OptimizerStep", "before all 2 gradients"});
}

}  // namespace
}  // namespace pipetrain::schedule
