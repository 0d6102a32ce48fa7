#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schedule/generators.h"
#include "sim/timeline.h"

namespace pipetrain::sim {
namespace {

TEST(Timeline, ChromeTraceHasOneCompleteEventPerAction) {
  schedule::ScheduleSpec spec;
  spec.name = "1f1b";
  spec.stages = 3;
  spec.microbatches = 4;
  schedule::Schedule s = schedule::make_schedule(spec);
  SimResult r = simulate(s, CostModel{});
  auto trace = nlohmann::json::parse(chrome_trace_json(timeline_from_simulation(s, r)));
  size_t actions = 0, complete = 0;
  for (const auto& list : s.actions) actions += list.size();
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      EXPECT_LT(e["pid"].get<int>(), 3);
    }
  }
  EXPECT_EQ(complete, actions);
  // First forward of worker 0: 0..1 ms -> 0..1000 us.
  bool found = false;
  for (const auto& e : trace["traceEvents"])
    if (e["name"] == "0F0") found = e["ts"] == 0.0 && e["dur"] == 1000.0;
  EXPECT_TRUE(found);
}

TEST(Timeline, SvgDrawsLanesAxisAndLegend) {
  Timeline t;
  t.title = "demo <1>";
  t.lanes = {"worker 0", "worker 1"};
  t.events = {{{"0F0", "Forward", 0, 1, 0}, {"0B0", "Backward", 3, 2, 0}},
              {{"1F0", "Forward", 1, 1, 0}, {"1W0", "BackwardWeight", 2, 1, 0}}};
  std::string svg = render_svg(t);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("demo &lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find("time (ms)"), std::string::npos);
  EXPECT_NE(svg.find("idle"), std::string::npos);
  EXPECT_NE(svg.find("weight grad"), std::string::npos);
  EXPECT_NE(svg.find("hsl(0,70%,72%)"), std::string::npos);  // forward of microbatch 0
  EXPECT_NE(svg.find("hsl(0,70%,32%)"), std::string::npos);  // its weight gradient
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

// A real run's memory: a strip under each lane on one scale (the largest peak, 4 MiB, at the
// strip's top). Lane 0's strip spans y 63-91 (lanes of 26 px, strips of 28, 6 px apart from
// y 36), so its 2 MiB peak sits at 77; lane 1's strip starts at 125, where its 4 MiB peak is.
TEST(Timeline, SvgDrawsEachLanesMemoryOnOneScale) {
  constexpr int64_t kMiB = 1 << 20;
  Timeline t;
  t.lanes = {"worker 0", "worker 1"};
  t.events = {{{"0F0", "Forward", 0, 1, 0, 0, 2 * kMiB, kMiB}},
              {{"1F0", "Forward", 0, 1, 0, 0, 4 * kMiB, 3 * kMiB}}};
  const std::string svg = render_svg(t);
  EXPECT_NE(svg.find("80.00,77.0"), std::string::npos) << svg;
  EXPECT_NE(svg.find("80.00,125.0"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">2 MiB</text>"), std::string::npos);
  EXPECT_NE(svg.find(">4 MiB</text>"), std::string::npos);
  EXPECT_NE(svg.find("0 to 4 MiB"), std::string::npos);
  t.events = {{{"0F0", "Forward", 0, 1, 0}}, {{"1F0", "Forward", 0, 1, 0}}};  // none measured
  EXPECT_EQ(render_svg(t).find("<polygon"), std::string::npos);
}

TEST(Timeline, StepWindowKeepsThoseStepsFromZero) {
  Timeline t;
  t.lanes = {"worker 0", "worker 1"};
  for (int step = 0; step < 5; ++step) {
    const double at = 10.0 * step;
    t.events.resize(2);
    t.events[0].push_back({"0F0", "Forward", at, 2, 0, step});
    t.events[1].push_back({"1F0", "Forward", at + 2, 3, 0, step});
  }
  const Timeline window = step_window(t, 2, 2);
  ASSERT_EQ(window.events.size(), 2u);
  ASSERT_EQ(window.events[0].size(), 2u);
  EXPECT_EQ(window.events[0][0].step, 2);
  EXPECT_DOUBLE_EQ(window.events[0][0].start_ms, 0);   // step 2 began at 20 ms
  EXPECT_DOUBLE_EQ(window.events[1][1].start_ms, 12);  // step 3's second lane: 32 - 20
  EXPECT_DOUBLE_EQ(median_forward_ms(window), 3);      // durations 2, 2, 3, 3
}

TEST(Timeline, ReadableWidthGivesAForwardItsLabelsWidth) {
  Timeline t;
  t.lanes = {"worker 0"};
  t.events = {{}};
  for (int k = 0; k < 60; ++k) t.events[0].push_back({"0F0", "Forward", 2.0 * k, 1, 0, 0});
  // 119 ms at 1 ms per forward: 119 x 32 px + 100 px of margins = 3908; 119 x 48 + 100 is
  // clamped to 4000.
  EXPECT_DOUBLE_EQ(readable_width_px(t), 3908);
  EXPECT_DOUBLE_EQ(readable_width_px(t, 48), 4000);
  EXPECT_DOUBLE_EQ(readable_width_px(t, 30), 119 * 30 + 100.0);
  const std::string svg = render_svg(t, {readable_width_px(t, 30), 26, false});
  EXPECT_NE(svg.find("width=\"3670\""), std::string::npos);
  EXPECT_NE(svg.find(">0F0</text>"), std::string::npos);  // the label fits in its box
}

}  // namespace
}  // namespace pipetrain::sim
