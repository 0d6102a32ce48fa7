// CSV round trips, and the reader's errors: UserError with a line number, never a crash.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/text_format.h"
#include "schedule/validate.h"
#include "../user_error.h"

namespace pipetrain::schedule {
namespace {

void expect_same(const Schedule& a, const Schedule& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.workers, b.workers);
  EXPECT_EQ(a.chunks, b.chunks);
  EXPECT_EQ(a.microbatches, b.microbatches);
  EXPECT_EQ(a.slices, b.slices);
  EXPECT_EQ(a.iterations, b.iterations);
  EXPECT_EQ(a.dp_width, b.dp_width);
  EXPECT_EQ(a.policy.kind, b.policy.kind);
  EXPECT_EQ(a.placement, b.placement);
  EXPECT_EQ(a.policy.predict_backward, b.policy.predict_backward);
  EXPECT_EQ(a.actions, b.actions);
}

TEST(Csv, RoundTripEverySchedule) {
  for (const std::string& name : schedule_names()) {
    ScheduleSpec spec;
    spec.name = name;
    spec.stages = 4;
    spec.microbatches = 8;
    spec.iterations = 2;
    spec.dp_width = 2;
    if (schedule_entry(name).parameters.chunks) spec.chunks = 2;
    if (name == "gpipe") spec.slices = 3;
    Schedule s = make_schedule(spec);
    std::string csv = to_csv(s);
    Schedule back = parse_csv(csv);
    expect_same(s, back);
    EXPECT_EQ(to_csv(back), csv);
    EXPECT_TRUE(validate(back).ok) << name;
  }
}

std::string error_of(const std::string& text) {
  return test::user_error_of([&] { parse_csv(text); });
}

TEST(Csv, ErrorsNameTheLine) {
  const std::string head =
      "# name=x workers=2 chunks=1 microbatches=1 slices=1 iterations=1 dp_width=1\n"
      "# policy=sync predict_backward=0\n"
      "worker,kind,iteration,microbatch,slice,chunk,version,peer\n";
  EXPECT_EQ(error_of(head + "0,Forward,0,0,0,0,0,-1\n"), "");
  EXPECT_EQ(error_of(head + "0,Jump,0,0,0,0,0,-1\n"), "line 4: unknown action kind 'Jump'");
  EXPECT_EQ(error_of(head + "7,Forward,0,0,0,0,0,-1\n"), "line 4: worker '7' is not in 0..1");
  EXPECT_EQ(error_of(head + "0,Forward,0,0\n"), "line 4: expected 8 fields, got 4");
  EXPECT_NE(error_of(head + "\n0,Forward,x,0,0,0,0,-1\n").find("line 5: iteration 'x'"),
            std::string::npos);
  EXPECT_NE(error_of("# workers=99999999\n").find("line 1: workers=99999999 out of range"),
            std::string::npos);
  EXPECT_NE(error_of("worker,kind\n").find("line 1: expected the header"), std::string::npos);
  EXPECT_NE(error_of("").find("no header"), std::string::npos);
  EXPECT_NE(error_of("# policy=magic\n").find("unknown weight policy"), std::string::npos);
}

// Mutated and random inputs: parse_csv either returns or throws UserError; validate then
// either accepts or explains. Nothing else may escape.
TEST(Csv, GarbageNeverCrashes) {
  ScheduleSpec spec;
  spec.name = "1f1b";
  spec.stages = 3;
  spec.microbatches = 3;
  const std::string good = to_csv(make_schedule(spec));
  std::mt19937 rng(7);
  const std::string alphabet = "0123456789-,#=\n abcFwdSGRA";
  for (int trial = 0; trial < 1500; ++trial) {
    std::string text = good;
    int edits = 1 + rng() % 6;
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % text.size();
      switch (rng() % 3) {
        case 0: text[at] = alphabet[rng() % alphabet.size()]; break;
        case 1: text.erase(at, 1 + rng() % 20); break;
        default: text.insert(at, 1, static_cast<char>(rng() % 256)); break;
      }
      if (text.empty()) text = "x";
    }
    try {
      Schedule s = parse_csv(text);
      Validation v = validate(s);
      if (!v.ok) {
        EXPECT_FALSE(v.error.empty());
      }
    } catch (const UserError&) {
    }
  }
}

}  // namespace
}  // namespace pipetrain::schedule
