#include "sim/timeline.h"

#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "schedule/steps.h"
#include "schedule/text_format.h"

namespace pipetrain::sim {

Timeline timeline_from_simulation(const schedule::Schedule& s, const SimResult& result) {
  Timeline t;
  t.title = s.name;
  for (int w = 0; w < s.workers; ++w) {
    t.lanes.push_back("worker " + std::to_string(w));
    t.events.emplace_back();
    for (size_t k = 0; k < s.actions[w].size(); ++k) {
      const schedule::Action& a = s.actions[w][k];
      const auto& time = result.times[w][k];
      bool per_microbatch = a.kind != schedule::ActionKind::OptimizerStep &&
                            a.kind != schedule::ActionKind::AllReduceGrads;
      // A no-flush schedule posts its all-reduce and goes on: drawn as the posting, as a real
      // run's trace shows it; the wait for what is left shows before the action that needs it.
      const bool posted = a.kind == schedule::ActionKind::AllReduceGrads && schedule::posts_replica_sums(s);
      t.events[w].push_back({schedule::action_token(s, w, a),
                             std::string(schedule::kind_name(a.kind)), time.start,
                             posted ? 0.0 : time.end - time.start,
                             per_microbatch ? s.global_microbatch(a) : -1});
    }
  }
  return t;
}

void add_simulated_memory(Timeline& timeline, const std::vector<std::vector<HeldDuring>>& held,
                          const std::vector<double>& base_bytes) {
  for (size_t w = 0; w < held.size(); ++w) {
    auto& events = timeline.events.at(w);
    for (size_t k = 0; k < events.size(); ++k) {
      events[k].memory_peak_bytes = int64_t(base_bytes.at(w) + held[w].at(k).peak);
      events[k].memory_live_bytes = int64_t(base_bytes.at(w) + held[w].at(k).at_end);
    }
  }
}

Timeline step_window(const Timeline& timeline, int first_step, int steps) {
  Timeline window;
  window.title = timeline.title;
  window.lanes = timeline.lanes;
  window.events.resize(timeline.events.size());
  double origin = std::numeric_limits<double>::infinity();
  for (size_t lane = 0; lane < timeline.events.size(); ++lane) {
    for (const TimedEvent& e : timeline.events[lane]) {
      if (e.step < first_step || e.step >= first_step + steps) continue;
      window.events[lane].push_back(e);
      origin = std::min(origin, e.start_ms);
    }
  }
  for (auto& lane : window.events) {
    for (auto& e : lane) e.start_ms -= origin;
  }
  return window;
}

double median_forward_ms(const Timeline& timeline) {
  std::vector<double> durations;
  for (const auto& lane : timeline.events) {
    for (const TimedEvent& e : lane) {
      if (e.category == "Forward") durations.push_back(e.duration_ms);
    }
  }
  if (durations.empty()) return 0;
  std::nth_element(durations.begin(), durations.begin() + durations.size() / 2, durations.end());
  return durations[durations.size() / 2];
}

namespace {

double mib(int64_t bytes) { return double(bytes) / (1024.0 * 1024.0); }

// A counter track per worker (Perfetto draws it as a graph under the worker's actions): the
// action's peak while it runs, what it left live from its end.
void add_memory_counter(nlohmann::json& events, const TimedEvent& e, size_t lane) {
  const auto counter = [&](double ms, int64_t bytes) {
    return nlohmann::json{{"name", "tensor memory (MiB)"}, {"ph", "C"},          {"pid", lane},
                          {"tid", 0},                      {"ts", ms * 1000.0}, {"args", {{"MiB", mib(bytes)}}}};
  };
  events.push_back(counter(e.start_ms, e.memory_peak_bytes));
  events.push_back(counter(e.start_ms + e.duration_ms, e.memory_live_bytes));
}

}  // namespace

std::string chrome_trace_json(const Timeline& timeline) {
  nlohmann::json events = nlohmann::json::array();
  for (size_t lane = 0; lane < timeline.lanes.size(); ++lane) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", lane},
                      {"tid", 0},
                      {"args", {{"name", timeline.lanes[lane]}}}});
    if (lane >= timeline.events.size()) continue;
    for (const TimedEvent& e : timeline.events[lane]) {
      nlohmann::json event = {{"name", e.name},
                              {"cat", e.category},
                              {"ph", "X"},
                              {"pid", lane},
                              {"tid", 0},
                              {"ts", e.start_ms * 1000.0},
                              {"dur", e.duration_ms * 1000.0}};
      if (e.microbatch >= 0) event["args"]["microbatch"] = e.microbatch;
      if (e.step >= 0) event["args"]["step"] = e.step;
      if (e.memory_peak_bytes >= 0) {
        event["args"]["memory_peak_mib"] = mib(e.memory_peak_bytes);
        event["args"]["memory_live_mib"] = mib(e.memory_live_bytes);
      }
      events.push_back(std::move(event));
      if (e.memory_peak_bytes >= 0) add_memory_counter(events, e, lane);
    }
  }
  nlohmann::json trace = {{"traceEvents", events},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"title", timeline.title}}}};
  return trace.dump(1);
}

}  // namespace pipetrain::sim
