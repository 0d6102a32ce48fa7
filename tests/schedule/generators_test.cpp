// Every generator yields a valid schedule; derived quantities (in-flight activations, live
// versions, staleness) have their closed forms.
#include <gtest/gtest.h>

#include "core/error.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/text_format.h"
#include "schedule/validate.h"

namespace pipetrain::schedule {
namespace {

ScheduleSpec spec_of(const std::string& name, int p, int m, int v = 1, int iterations = 1) {
  ScheduleSpec spec;
  spec.name = name;
  spec.stages = p;
  spec.microbatches = m;
  spec.chunks = v;
  spec.iterations = iterations;
  return spec;
}

TEST(Generators, AllNamesValidForManySizes) {
  for (const std::string& name : schedule_names()) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 9; ++m) {
        const ScheduleEntry& entry = schedule_entry(name);
        int v = entry.parameters.chunks ? 2 : 1;
        if (name == "interleaved" && m % p != 0) continue;
        if ((name == "2bw" || name == "2bw-predict") && m < p) continue;
        if (m < entry.parameters.microbatches_per_worker * p) continue;
        for (int w : {1, 2}) {
          ScheduleSpec spec = spec_of(name, p, m, v, 2);
          spec.dp_width = w;
          Schedule s = make_schedule(spec);
          Validation check = validate(s);
          ASSERT_TRUE(check.ok) << name << " p=" << p << " m=" << m << "\n" << check.error;
        }
      }
    }
  }
}

TEST(Generators, GpipeSlicesRunForwardInOrderAndBackwardInReverse) {
  ScheduleSpec spec = spec_of("gpipe", 3, 2);
  spec.slices = 4;
  Schedule s = make_schedule(spec);
  ASSERT_TRUE(validate(s).ok) << validate(s).error;
  std::vector<int> forward, backward;
  for (const Action& a : s.actions[0]) {
    if (a.microbatch != 0) continue;
    if (a.kind == ActionKind::Forward) forward.push_back(a.slice);
    if (a.kind == ActionKind::Backward) backward.push_back(a.slice);
  }
  EXPECT_EQ(forward, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(backward, (std::vector<int>{3, 2, 1, 0}));
}

TEST(Generators, InflightActivations1f1bVsGpipe) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 16; ++m) {
      auto one = validate_or_throw(make_schedule(spec_of("1f1b", p, m)));
      auto gpipe = validate_or_throw(make_schedule(spec_of("gpipe", p, m)));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(one.peak_inflight[s], std::min(p - s, m)) << "p=" << p << " m=" << m;
        EXPECT_EQ(gpipe.peak_inflight[s], m);
      }
    }
  }
}

// A CUDA-graphed chunk's slots: per chunk, the most microbatches it holds (1F1B p - s, GPipe m,
// ZB-H2 2p - 1 on the first worker; ZB-V's two chunks on worker 0 of 2 with m = 4: the first
// stage runs all 4 forwards before its first backward, the last stage one microbatch at a time);
// a token slice's later slices take no slot of their own.
TEST(Generators, MostInFlightPerChunk) {
  for (int p = 1; p <= 4; ++p) {
    const int m = 2 * p;
    const Schedule one = make_schedule(spec_of("1f1b", p, m));
    const Schedule gpipe = make_schedule(spec_of("gpipe", p, m));
    for (int w = 0; w < p; ++w) {
      EXPECT_EQ(most_in_flight(one.actions[w], 0), p - w) << "p=" << p;
      EXPECT_EQ(most_in_flight(gpipe.actions[w], 0), m);
      EXPECT_FALSE(splits_backward(one.actions[w], 0));
    }
  }
  const Schedule zb = make_schedule(spec_of("zb-h2", 3, 6));
  EXPECT_EQ(most_in_flight(zb.actions[0], 0), 5);
  EXPECT_FALSE(splits_backward(zb.actions[0], 0));  // the first stage: whole backwards
  EXPECT_TRUE(splits_backward(zb.actions[1], 0));
  const Schedule v = make_schedule(spec_of("zb-v", 2, 4, 2));
  EXPECT_EQ(most_in_flight(v.actions[0], 0), 4);
  EXPECT_EQ(most_in_flight(v.actions[0], 1), 1);
  ScheduleSpec sliced = spec_of("gpipe", 2, 3);
  sliced.slices = 4;
  EXPECT_EQ(most_in_flight(make_schedule(sliced).actions[1], 0), 3);
}

TEST(Generators, LiveWeightVersions) {
  for (int p = 1; p <= 8; ++p) {
    for (int m = p; m <= 16; m += 3) {
      auto flush = validate_or_throw(make_schedule(spec_of("1f1b", p, m, 1, 3)));
      auto two = validate_or_throw(make_schedule(spec_of("2bw", p, m, 1, 4)));
      auto stash = validate_or_throw(make_schedule(spec_of("pipedream", p, m, 1, 3)));
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(flush.peak_live_versions[s], 1);
        EXPECT_EQ(two.peak_live_versions[s], 2) << "p=" << p << " m=" << m;
        EXPECT_EQ(stash.peak_live_versions[s], p - s) << "p=" << p << " stage " << s;
      }
    }
  }
}

TEST(Generators, TwoBwGroupsReadTheVersionBeforeTheLast) {
  Schedule s = make_schedule(spec_of("2bw", 4, 4, 1, 4));
  for (int w = 0; w < 4; ++w)
    for (const Action& a : s.actions[w])
      if (is_compute(a.kind)) {
        EXPECT_EQ(a.version, std::max(0, a.iteration - 1));
      }
}

// The first N groups flush: each reads the version the previous one made (group N too, on the
// fresh fill after the last flush); from group N+1 on, 2BW's version before the last.
TEST(Generators, TwoBwAfterASyncWarmUpDelaysOnlyTheLaterGroups) {
  for (int p : {1, 2, 4}) {
    ScheduleSpec spec = spec_of("2bw", p, 4, 1, 7);
    spec.sync_iterations = 3;
    const Schedule s = make_schedule(spec);
    const ScheduleStats stats = validate_or_throw(s);
    EXPECT_EQ(s.policy.sync_groups, 3);
    for (int w = 0; w < p; ++w) {
      EXPECT_EQ(stats.peak_live_versions[size_t(w)], 2) << "p=" << p;
      int compared = 0;
      for (const Action& a : s.actions[size_t(w)]) {
        if (!is_compute(a.kind)) continue;
        EXPECT_EQ(a.version, a.iteration <= 3 ? a.iteration : a.iteration - 1) << "p=" << p;
        ++compared;
      }
      EXPECT_EQ(compared, 2 * 4 * 7);
    }
    // A flushed group's first forward follows the previous group's update on every worker.
    for (int w = 0; w < p; ++w) {
      int last_update = -1;
      for (const Action& a : s.actions[size_t(w)]) {
        if (a.kind == ActionKind::OptimizerStep) last_update = a.iteration;
        if (a.kind == ActionKind::Forward && a.iteration <= 3) {
          EXPECT_EQ(last_update, a.iteration - 1);
        }
      }
    }
  }
  ScheduleSpec refused = spec_of("1f1b", 2, 4, 1, 4);
  refused.sync_iterations = 2;
  EXPECT_THROW(make_schedule(refused), UserError);
  refused.name = "2bw-predict";
  EXPECT_THROW(make_schedule(refused), UserError);
}

TEST(Generators, PipeOptimStalenessIsDerivedAsDMinusRMinus1) {
  for (int p = 1; p <= 8; ++p) {
    Schedule s = make_schedule(spec_of("pipeoptim", p, 8, 1, 3));
    ASSERT_EQ(static_cast<int>(s.policy.forward_staleness.size()), p);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(s.policy.forward_staleness[r], p - r - 1) << "p=" << p << " r=" << r;
      EXPECT_EQ(s.policy.backward_staleness[r], 0);
    }
  }
}

TEST(Generators, SpecTrainStalenessMatchesThePaper) {
  for (int p = 1; p <= 8; ++p) {
    ScheduleSpec spec = spec_of("spectrain", p, 8, 1, 3);
    spec.nominal_backward = 1.0;  // SpecTrain's model: one slot per forward and per backward
    spec.nominal_weight = 0.5;
    Schedule s = make_schedule(spec);
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(s.policy.backward_staleness[r], r / 2) << "p=" << p << " r=" << r;
      EXPECT_EQ(s.policy.forward_staleness[r], r / 2 + p - r - 1) << "p=" << p << " r=" << r;
    }
  }
}

TEST(Generators, BadParametersAreUserErrors) {
  EXPECT_THROW(make_schedule(spec_of("nope", 4, 8)), UserError);
  EXPECT_THROW(make_schedule(spec_of("2bw", 4, 3)), UserError);
  EXPECT_THROW(make_schedule(spec_of("1f1b", 0, 8)), UserError);
  EXPECT_THROW(make_schedule(spec_of("gpipe", 4, -1)), UserError);
  EXPECT_THROW(make_schedule(spec_of("interleaved", 4, 6, 2)), UserError);
  EXPECT_THROW(make_schedule(spec_of("1f1b", 4, 8, 2)), UserError);
  try {
    make_schedule(spec_of("2bw", 4, 2));
    FAIL();
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("m >= d"), std::string::npos) << e.what();
  }
}

TEST(Generators, GridShowsOneRowPerWorker) {
  Schedule s = make_schedule(spec_of("1f1b", 2, 3));
  EXPECT_EQ(format_grid(s), "w0: 0F0 0F1 0B0 0F2 0B1 0B2\nw1: 1F0 1B0 1F1 1B1 1F2 1B2\n");
}

}  // namespace
}  // namespace pipetrain::schedule
