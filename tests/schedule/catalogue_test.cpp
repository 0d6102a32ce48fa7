// The schedule catalogue: each entry's check accepts exactly what its generator can build, its
// closed-form rule agrees with the versions its generator assigns, and what it says about the
// runtime is what errors and docs say.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/run_rules.h"
#include "schedule/steps.h"
#include "schedule/validate.h"
#include "../user_error.h"

namespace pipetrain::schedule {
namespace {

// Every combination of small sizes, the common ones valid.
std::vector<ScheduleSpec> small_specs(const std::string& name) {
  std::vector<ScheduleSpec> specs;
  for (int p = 1; p <= 4; ++p)
    for (int m = 1; m <= 8; ++m)
      for (int v : {1, 2, 3})
        for (int slices : {1, 2})
          for (int w : {1, 2})
            for (int iterations : {1, 2}) {
              ScheduleSpec spec;
              spec.name = name;
              spec.stages = p, spec.microbatches = m, spec.chunks = v, spec.slices = slices;
              spec.dp_width = w, spec.iterations = iterations;
              specs.push_back(spec);
            }
  return specs;
}

TEST(Catalogue, NamesAreUniqueAndEachGeneratorBuildsItsOwnEntry) {
  std::set<std::string> names;
  for (const auto& entry : schedule_catalogue()) {
    EXPECT_TRUE(names.insert(entry.name).second) << entry.name << " twice";
    EXPECT_FALSE(entry.summary.empty());
    EXPECT_EQ(entry.summary.find('|'), std::string::npos) << "a table cell: " << entry.summary;
    ScheduleSpec spec;
    spec.name = entry.name;
    spec.stages = 2, spec.microbatches = 4;
    spec.chunks = entry.parameters.v_shape ? 2 : 1;
    const Schedule s = make_schedule(spec);
    EXPECT_EQ(s.name, entry.name);
    EXPECT_EQ(s.policy.kind, entry.policy) << entry.name;
    bool splits = false;
    for (int w = 0; w < s.workers; ++w)
      for (int chunk = 0; chunk < s.chunks; ++chunk) {
        splits = splits || splits_backward(s.actions[w], chunk);
      }
    EXPECT_EQ(splits, entry.splits_backward) << entry.name;
  }
  EXPECT_EQ(schedule_names().size(), schedule_catalogue().size());
  EXPECT_EQ(find_schedule("zigzag"), nullptr);
}

TEST(Catalogue, EveryGeneratorBuildsValidSchedulesWhereItsCheckAccepts) {
  for (const auto& entry : schedule_catalogue()) {
    int accepted = 0;
    for (const ScheduleSpec& spec : small_specs(entry.name)) {
      const std::string refusal = entry.check(spec);
      if (!refusal.empty()) {
        EXPECT_EQ(test::user_error_of([&] { make_schedule(spec); }), refusal);
        continue;
      }
      ++accepted;
      const Validation check = validate(make_schedule(spec));
      ASSERT_TRUE(check.ok) << entry.name << " p=" << spec.stages << " m=" << spec.microbatches
                            << " v=" << spec.chunks << " slices=" << spec.slices << "\n"
                            << check.error;
    }
    EXPECT_GT(accepted, 0) << entry.name;
  }
}

TEST(Catalogue, ChecksRefuseWhatTheGeneratorsCannotBuild) {
  for (const auto& entry : schedule_catalogue()) {
    int refused = 0;
    for (const ScheduleSpec& spec : small_specs(entry.name)) {
      if (entry.check(spec).empty()) continue;
      ++refused;
      // The generator itself checks nothing: what it builds anyway must not validate.
      bool built_valid = false;
      try {
        built_valid = validate(entry.generate(spec)).ok;
      } catch (const std::exception&) {
      }
      EXPECT_FALSE(built_valid) << entry.name << " refuses a schedule it builds: "
                                << entry.check(spec);
    }
    EXPECT_GT(refused, 0) << entry.name;  // every generator has limits (chunks or slices)
  }
}

TEST(Catalogue, ClosedFormRulesReadTheVersionsTheGeneratorsAssign) {
  const int p = 4, m = 6;  // m > p: 2BW's groups straddle the stages' warm-ups
  for (const auto& entry : schedule_catalogue()) {
    if (entry.flushes()) {
      EXPECT_EQ(entry.reference.forward, nullptr) << entry.name;
      continue;
    }
    ASSERT_NE(entry.reference.forward, nullptr) << entry.name;
    ASSERT_NE(entry.reference.backward, nullptr) << entry.name;
    ScheduleSpec spec;
    spec.name = entry.name;
    spec.stages = p, spec.microbatches = m, spec.iterations = 3;
    const Schedule s = make_schedule(spec);
    int compared = 0;
    for (int w = 0; w < s.workers; ++w) {
      for (const Action& a : s.actions[w]) {
        if (!is_compute(a.kind)) continue;
        const int r = s.stage_of(w, a);
        const bool forward = a.kind == ActionKind::Forward;
        const Reads reads = (forward ? entry.reference.forward : entry.reference.backward)(
            r, s.global_microbatch(a), p, m);
        EXPECT_EQ(a.version, reads.version) << entry.name << " stage " << r << " "
                                            << kind_name(a.kind) << " " << s.global_microbatch(a);
        // What the runtime extrapolates: per stage (predicted) or per version (2bw-predict).
        const auto& staleness = forward ? s.policy.forward_staleness : s.policy.backward_staleness;
        const bool predicts = forward || s.policy.predict_backward;
        const int ahead = entry.policy == WeightPolicyKind::Predicted
                              ? (predicts ? staleness.at(size_t(r)) : 0)
                              : s.policy.predict_ahead;
        EXPECT_EQ(ahead, reads.predict) << entry.name << " stage " << r;
        ++compared;
      }
    }
    EXPECT_EQ(compared, 2 * p * m * 3) << entry.name;
  }
}

// Float16's loss scale is a weight version's (train/loss_scale.h): every forward of one update's
// microbatches on the last stage reads the version loss_version names, in the generated lists,
// with and without a synchronous warm-up, at most one update behind (the two scales a
// LossScale keeps).
TEST(Catalogue, LossVersionIsOnePerUpdate) {
  const int p = 3, m = 4;
  for (const auto& entry : schedule_catalogue()) {
    if (!entry.runtime.runs || entry.placement() != Placement::Looping) continue;
    for (const int warmup : {0, 1}) {
      if (warmup > 0 && !entry.parameters.sync_warmup) continue;
      ScheduleSpec spec;
      spec.name = entry.name;
      spec.stages = p, spec.microbatches = m, spec.iterations = 4, spec.sync_iterations = warmup;
      if (!entry.check(spec).empty()) continue;
      const Schedule s = make_schedule(spec);
      int compared = 0;
      for (int w = 0; w < s.workers; ++w) {
        for (const Action& a : s.actions[w]) {
          if (a.kind != ActionKind::Forward || s.stage_of(w, a) != p - 1) continue;
          const int64_t j = s.global_microbatch(a);
          const int64_t update = entry.updates_per_microbatch() ? j : j / m;
          const int version = loss_version(entry, update, p, m, warmup);
          EXPECT_EQ(a.version, version) << entry.name << " microbatch " << j << " warm-up " << warmup;
          EXPECT_GE(version, update - 1) << entry.name;
          EXPECT_LE(version, update) << entry.name;
          ++compared;
        }
      }
      EXPECT_EQ(compared, m * 4) << entry.name;
    }
  }
}

// A checkpoint after k steps holds what the actions of iterations >= k read from before the
// cut (versions below the updates done; 2bw-predict's extrapolated latest version too), found
// here from the generated lists. Under prediction those reads are forwards that ran ahead of
// step k (before its bounds begin), the copies the runtime keeps.
TEST(Catalogue, CheckpointedVersionsAreWhatTheRemainingActionsReadFromBeforeTheCut) {
  for (const auto& entry : schedule_catalogue()) {
    if (entry.flushes()) continue;
    for (const auto& [p, m] : std::vector<std::pair<int, int>>{{2, 2}, {3, 4}, {4, 4}, {3, 5}}) {
      ScheduleSpec spec;
      spec.name = entry.name;
      spec.stages = p, spec.microbatches = m, spec.iterations = 5;
      const Schedule s = make_schedule(spec);
      Config config;
      config.pipeline.schedule = entry.name;
      config.pipeline.stages = p;
      config.train.microbatches = m;
      config.train.steps = spec.iterations;
      // (Before the last step: after it 2BW keeps what a longer list would read, checked below.)
      for (int k = 1; k + 1 < spec.iterations; ++k) {
        const int updates = entry.updates_per_microbatch() ? k * m : k;
        for (int w = 0; w < s.workers; ++w) {
          const auto bounds = step_bounds(s, w, 0);
          std::set<int, std::greater<int>> expected;
          for (size_t i = 0; i < s.actions[w].size(); ++i) {
            const Action& a = s.actions[w][i];
            if (!is_compute(a.kind) || a.iteration < k) continue;
            const bool predicted_copy = entry.policy == WeightPolicyKind::DoubleBuffer &&
                                        s.policy.predict_ahead > 0 && a.version == updates;
            if (a.version >= updates && !predicted_copy) continue;
            expected.insert(a.version);
            if (entry.policy == WeightPolicyKind::Predicted) {
              EXPECT_LT(i, bounds.at(size_t(k)).first) << entry.name << " worker " << w;
            }
          }
          EXPECT_EQ(checkpointed_versions(config, w, k),
                    std::vector<int>(expected.begin(), expected.end()))
              << entry.name << " p " << p << " m " << m << " stage " << w << " step " << k;
        }
      }
      // After the last step: what the next step would read (a final checkpoint continues), the
      // same as a longer run's checkpoint after that step holds (checked against that run's lists
      // above, at its earlier steps).
      Config longer = config;
      longer.train.steps = spec.iterations + 2;
      for (int w = 0; w < s.workers; ++w) {
        const auto final_versions = checkpointed_versions(config, w, spec.iterations);
        EXPECT_EQ(final_versions, checkpointed_versions(longer, w, spec.iterations)) << entry.name;
        EXPECT_FALSE(final_versions.empty() && w + 1 < s.workers) << entry.name << " stage " << w;
      }
    }
  }
}

// Every schedule real workers run runs data-parallel; ZeRO-1 (a shard of the optimizer state per
// replica) with every one whose rule reads no prediction (which extrapolates with that state).
TEST(Catalogue, WidthAndZeroOneFollowThePrediction) {
  const int p = 4, m = 4;
  for (const auto& entry : schedule_catalogue()) {
    if (!entry.runtime.runs) continue;
    EXPECT_TRUE(entry.runtime.data_parallel) << entry.name;
    bool predicts = false;
    for (int r = 0; r < p && !entry.flushes(); ++r) {
      for (int64_t j = 0; j < 3 * m; ++j) {
        predicts = predicts || entry.reference.forward(r, j, p, m).predict > 0 ||
                   entry.reference.backward(r, j, p, m).predict > 0;
      }
    }
    EXPECT_EQ(entry.runtime.zero1, !predicts) << entry.name;
  }
}

TEST(Catalogue, UpdateAndResumeRulesFollowThePolicy) {
  for (const auto& entry : schedule_catalogue()) {
    EXPECT_EQ(entry.rule == "sync", entry.flushes()) << entry.name;
    // Between two steps no-flush policies checkpoint the weights their early actions read.
    EXPECT_TRUE(entry.resumes) << entry.name;
    EXPECT_EQ(resume_refusal(entry.rule), "") << entry.name;
  }
  EXPECT_NE(resume_refusal("no-such-rule").find("not in the schedule catalogue"), std::string::npos);
  Config config;
  config.pipeline.stages = 2;
  config.pipeline.schedule = "2bw";
  EXPECT_EQ(policy_of(config), "2bw");
  config.pipeline.schedule = "interleaved";
  EXPECT_EQ(policy_of(config), "sync");
  config.pipeline.stages = 1;
  config.pipeline.schedule = "pipeoptim";
  // One stage still runs the schedule's rule (issue 16, 3d): no silent synchronous training.
  EXPECT_EQ(policy_of(config), "pipeoptim");
}

TEST(Catalogue, RuntimeRefusalsNameTheSchedulesThatRun) {
  std::vector<std::string> runs, simulated_only;
  for (const auto& entry : schedule_catalogue()) {
    (entry.runtime.runs ? runs : simulated_only).push_back(entry.name);
  }
  // Since ZB-H2 and the V placements run on workers (issue 34), every schedule does.
  EXPECT_EQ(simulated_only, std::vector<std::string>{});
  const std::string error = test::user_error_of([&] { runtime_schedule("zigzag", "--pipeline.schedule"); });
  EXPECT_EQ(error.rfind("--pipeline.schedule: pipeline.schedule ", 0), 0u) << error;
  EXPECT_NE(error.find(join(runs, ", ")), std::string::npos) << error;
  EXPECT_EQ(&runtime_schedule("1f1b", ""), find_schedule("1f1b"));
}

TEST(Catalogue, DocsScheduleListIsTheCatalogue) {
  const std::string doc = read_file(std::string(PIPETRAIN_SOURCE_DIR) + "/docs/schedules.md");
  EXPECT_NE(doc.find(catalogue_markdown()), std::string::npos)
      << "regenerate with: scripts/gen_schedule_docs.sh\n" << catalogue_markdown();
}

}  // namespace
}  // namespace pipetrain::schedule

// 2BW suggests the recipe measured best under its delayed gradients (docs/weight-policies.md)
// to a run that uses another, and nothing to one that follows it or to a flushing schedule.
TEST(Catalogue, TwoBWAdvisesItsMeasuredBestRecipe) {
  pipetrain::Config config;
  config.pipeline.schedule = "2bw";
  config.train.optimizer = "adamw";
  const std::string advice = pipetrain::schedule::training_advice(config);
  EXPECT_NE(advice.find("--train.optimizer muon --train.delay_correction error_feedback"), std::string::npos)
      << advice;
  config.train.optimizer = "muon";
  EXPECT_NE(pipetrain::schedule::training_advice(config), "");  // error feedback still missing
  config.train.delay_correction = "error_feedback";
  config.train.steps = 800;  // the warm-up is advised as a quarter of the run
  EXPECT_NE(pipetrain::schedule::training_advice(config).find("--pipeline.sync_warmup_steps 200 "),
            std::string::npos) << pipetrain::schedule::training_advice(config);
  config.pipeline.sync_warmup_steps = 50;
  EXPECT_EQ(pipetrain::schedule::training_advice(config), "");
  config.pipeline.schedule = "1f1b";
  config.train.optimizer = "adamw";
  config.train.delay_correction = "none";
  config.pipeline.sync_warmup_steps = 0;
  EXPECT_EQ(pipetrain::schedule::training_advice(config), "");
}
