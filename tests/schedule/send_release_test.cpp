// Which sends a receive lets go of (schedule/send_release.h): the exact table of a small 1F1B,
// an independent check of every release against a replay's clock, the step lists' releases
// against the whole list's, and how few sends stay in flight in 2BW's steady state.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/replay.h"
#include "schedule/send_release.h"
#include "schedule/step_lists.h"

namespace pipetrain::schedule {
namespace {


std::string label(const Message& m) {
  return fmt::format("{}{}@{}", m.gradient ? "G" : "A", m.microbatch, m.to_stage);
}

// "received -> released" for each of `worker`'s receives that releases something.
std::vector<std::string> release_table(const Schedule& s, int worker) {
  const auto released = sends_released_by_receives(s, worker, s.actions);
  std::vector<std::string> table;
  for (size_t k = 0; k < released.size(); ++k) {
    if (!released[k]) continue;
    const Action& a = s.actions[size_t(worker)][k];
    table.push_back(label(*message_of(s, worker, a)) + " -> " + label(*released[k]));
  }
  return table;
}

// 1F1B over 2 stages: stage 0 sends A(k+2) only after taking G(k), so the last stage's receive of
// A(k+2) lets go of G(k); the last stage takes A(k+1) before it sends G(k) (its lists put each
// receive ahead of the backward before it), so G(k) lets go of A(k+1), and G(3) of A(3) again.
TEST(SendRelease, OneFOneBOfTwoStagesReleasesWhatThePeerTookBeforeReplying) {
  ScheduleSpec spec;
  spec.name = "1f1b", spec.stages = 2, spec.microbatches = 4;
  const Schedule s = make_schedule(spec);
  EXPECT_EQ(release_table(s, 0),
            (std::vector<std::string>{"G0@0 -> A1@1", "G1@0 -> A2@1", "G2@0 -> A3@1", "G3@0 -> A3@1"}));
  EXPECT_EQ(release_table(s, 1), (std::vector<std::string>{"A2@1 -> G0@0", "A3@1 -> G1@0"}));
}

struct Case {
  std::string name;
  int stages, microbatches, chunks, slices, iterations;
};

std::vector<Case> catalogue_cases() {
  std::vector<Case> cases;
  for (const auto& entry : schedule_catalogue()) {
    for (const auto& [p, m] : {std::pair{2, 2}, {2, 8}, {3, 5}, {4, 8}}) {
      for (const int chunks : {1, 2}) {
        for (const int slices : {1, 2}) {
          ScheduleSpec spec;
          spec.name = entry.name, spec.stages = p, spec.microbatches = m;
          spec.chunks = chunks, spec.slices = slices;
          spec.iterations = entry.flushes() ? 1 : 6;
          if (entry.check(spec).empty()) cases.push_back({entry.name, p, m, chunks, slices, spec.iterations});
        }
      }
    }
  }
  return cases;
}

ScheduleSpec spec_of(const Case& c) {
  ScheduleSpec spec;
  spec.name = c.name, spec.stages = c.stages, spec.microbatches = c.microbatches;
  spec.chunks = c.chunks, spec.slices = c.slices, spec.iterations = c.iterations;
  return spec;
}

std::string label_of(const Case& c) {
  return fmt::format("{} p={} m={} v={} slices={}", c.name, c.stages, c.microbatches, c.chunks, c.slices);
}

// The independent check: replayed with eager sends, the peer has taken the released message
// before this worker's receive ends, on the replay's clock (matched FIFO, not by the message's
// name). Each release names a message this worker sent that peer, earlier in its list.
TEST(SendRelease, EveryReleasedMessageHadArrivedOnTheReplaysClock) {
  int releases = 0;
  for (const Case& c : catalogue_cases()) {
    const Schedule s = make_schedule(spec_of(c));
    const TransferMatch match = match_transfers(s);
    ASSERT_TRUE(match.problem.empty()) << label_of(c);
    ReplayOptions options;
    options.mode = SendMode::Eager;
    const ReplayResult replayed = replay(s, match, [](int, const Action&) { return 1.0; }, options);
    ASSERT_TRUE(replayed.finished) << label_of(c);
    for (int w = 0; w < s.workers; ++w) {
      const auto& list = s.actions[size_t(w)];
      const auto released = sends_released_by_receives(s, w, s.actions);
      std::map<std::pair<int, Message>, size_t> sent_at;  // (peer, message) -> position
      for (size_t k = 0; k < list.size(); ++k) {
        if (is_send(list[k].kind)) sent_at[{list[k].peer, *message_of(s, w, list[k])}] = k;
        if (!released[k]) continue;
        ASSERT_TRUE(is_recv(list[k].kind)) << label_of(c);
        const auto send = sent_at.find({list[k].peer, *released[k]});
        ASSERT_NE(send, sent_at.end()) << label_of(c) << " worker " << w << " position " << k;
        const int taken_at = match.partner[size_t(w)][send->second];
        const double taken = replayed.times[size_t(list[k].peer)][size_t(taken_at)].end;
        EXPECT_LE(taken, replayed.times[size_t(w)][k].end) << label_of(c) << " worker " << w << " position " << k;
        ++releases;
      }
    }
  }
  EXPECT_GT(releases, 1000);
}

// The runtime finds releases one step at a time (StepLists): each is the whole list's or none,
// and most receives of no-flush runs release something (90%).
TEST(SendRelease, StepListsReleaseWhatTheWholeListReleasesOrNothing) {
  int found = 0, receives = 0;
  for (const Case& c : catalogue_cases()) {
    if (c.iterations == 1) continue;
    const ScheduleSpec spec = spec_of(c);
    const StepLists lists(spec);
    const Schedule whole = make_schedule(spec);
    std::vector<std::map<std::pair<int, Message>, std::optional<Message>>> whole_release(size_t(whole.workers));
    for (int w = 0; w < whole.workers; ++w) {
      const auto released = sends_released_by_receives(whole, w, whole.actions);
      for (size_t k = 0; k < released.size(); ++k) {
        const Action& a = whole.actions[size_t(w)][k];
        if (is_recv(a.kind)) whole_release[size_t(w)][{a.peer, *message_of(whole, w, a)}] = released[k];
      }
    }
    for (int step = 0; step < c.iterations; ++step) {
      std::vector<std::vector<Action>> step_lists;
      for (int w = 0; w < whole.workers; ++w) step_lists.push_back(lists.step(w, step));
      for (int w = 0; w < whole.workers; ++w) {
        const auto released = sends_released_by_receives(lists.schedule(), w, step_lists);
        for (size_t k = 0; k < released.size(); ++k) {
          const Action& a = step_lists[size_t(w)][k];
          if (!is_recv(a.kind)) continue;
          ++receives;
          if (!released[k]) continue;
          ++found;
          EXPECT_EQ(released[k], whole_release[size_t(w)].at({a.peer, *message_of(whole, w, a)}))
              << label_of(c) << " step " << step << " worker " << w;
        }
      }
    }
  }
  EXPECT_GT(found, 0.8 * receives) << found << " of " << receives;  // 2864 of 3168
}

// 2BW over 2 stages and 8 microbatches: with releases, at most 2 sends stay in flight on either
// worker at any point of the steady steps, where waiting for them at the next step's end held
// up to 8 + 15.
TEST(SendRelease, TwoBwKeepsAtMostTwoSendsInFlight) {
  ScheduleSpec spec;
  spec.name = "2bw", spec.stages = 2, spec.microbatches = 8, spec.iterations = 6;
  const Schedule s = make_schedule(spec);
  for (int w = 0; w < s.workers; ++w) {
    const auto& list = s.actions[size_t(w)];
    const auto released = sends_released_by_receives(s, w, s.actions);
    std::vector<Message> in_flight;  // in the order sent (to the one peer)
    std::set<Message> sent;
    size_t most = 0;
    for (size_t k = 0; k < list.size(); ++k) {
      if (is_send(list[k].kind)) {
        in_flight.push_back(*message_of(s, w, list[k]));
        sent.insert(in_flight.back());
      }
      if (released[k]) {
        ASSERT_TRUE(sent.count(*released[k])) << "worker " << w << " position " << k;
        const auto last = std::find(in_flight.begin(), in_flight.end(), *released[k]);
        if (last != in_flight.end()) in_flight.erase(in_flight.begin(), last + 1);  // else gone
      }
      most = std::max(most, in_flight.size());
    }
    EXPECT_LE(most, 2u) << "worker " << w;
    EXPECT_GE(most, 1u) << "worker " << w;
  }
}

}  // namespace
}  // namespace pipetrain::schedule
