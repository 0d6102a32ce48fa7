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

}  // namespace
}  // namespace pipetrain::sim
