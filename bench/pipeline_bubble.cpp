// Measured pipeline bubble vs. the simulator's prediction: runs 2-stage GPipe and 1F1B at
// m in {2, 4, 8} with `pipetrain train`, reads the real-run timeline (trace.json), and per step
// takes each worker's idle share of the step window (first action start to last action end on
// any worker). The prediction simulates the same schedule with the per-stage forward/backward/
// optimizer times measured in that trace and the measured p2p link; the closed form
// (p-1)/(m+p-1) assumes equal stages and free transfers.
//   ./build/bench/pipeline_bubble [--steps 20] [--microbatch 4]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/machine.h"
#include "profile/link_profile.h"
#include "schedule/generators.h"
#include "sim/simulator.h"

using namespace pipetrain;
namespace fs = std::filesystem;

namespace {

struct Event {
  std::string kind;
  double start_ms, duration_ms;
};

struct Measured {
  double bubble = 0;                   // mean over workers and measured steps
  std::vector<sim::StageCost> stages;  // mean per-action times, per worker
};

// Lanes (workers) of the trace, each split into its steps (the events' "step").
std::vector<std::vector<std::vector<Event>>> steps_per_lane(const nlohmann::json& trace) {
  std::map<int, std::map<int, std::vector<Event>>> lanes;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    lanes[e.at("pid").get<int>()][e.at("args").at("step").get<int>()].push_back(
        {e.at("cat"), e.at("ts").get<double>() / 1e3, e.at("dur").get<double>() / 1e3});
  }
  std::vector<std::vector<std::vector<Event>>> out;
  for (auto& [lane, steps] : lanes) {
    out.emplace_back();
    for (auto& [step, events] : steps) out.back().push_back(std::move(events));
  }
  return out;
}

bool is_compute(const std::string& kind) {
  return kind == "Forward" || kind == "Backward" || kind == "OptimizerStep";
}

Measured measure(const nlohmann::json& trace, int skip_steps) {
  const auto lanes = steps_per_lane(trace);
  Measured m;
  m.stages.resize(lanes.size());
  std::vector<std::map<std::string, std::pair<double, int>>> sums(lanes.size());
  size_t steps = lanes.front().size();
  for (const auto& lane : lanes) steps = std::min(steps, lane.size());
  int counted = 0;
  for (size_t k = size_t(skip_steps); k < steps; ++k) {
    double begin = 1e300, end = -1e300;
    for (const auto& lane : lanes) {
      begin = std::min(begin, lane[k].front().start_ms);
      end = std::max(end, lane[k].back().start_ms + lane[k].back().duration_ms);
    }
    for (size_t w = 0; w < lanes.size(); ++w) {
      double busy = 0;
      for (const auto& e : lanes[w][k]) {
        if (!is_compute(e.kind)) continue;
        busy += e.duration_ms;
        sums[w][e.kind].first += e.duration_ms;
        sums[w][e.kind].second += 1;
      }
      m.bubble += 1 - busy / (end - begin);
      ++counted;
    }
  }
  m.bubble /= counted;
  for (size_t w = 0; w < lanes.size(); ++w) {
    const auto mean = [&](const char* kind) {
      const auto it = sums[w].find(kind);
      return it == sums[w].end() ? 0.0 : it->second.first / it->second.second;
    };
    m.stages[w].forward_ms = mean("Forward");
    m.stages[w].backward_ms = mean("Backward");
    m.stages[w].weight_ms = m.stages[w].backward_ms / 2;
    m.stages[w].optimizer_ms = mean("OptimizerStep") * 2;  // begin (its action) + apply
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_in_process();
  int64_t steps = 20, microbatch = 4;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--steps") steps = std::atoll(argv[i + 1]);
    if (std::string(argv[i]) == "--microbatch") microbatch = std::atoll(argv[i + 1]);
  }
  const auto links = profile::measure_local_links(25);
  const auto activation_bytes = double(4 * microbatch * 128 * 128);  // default model boundary
  fmt::print("2 stages, default GPT, microbatch {} sequences; p2p link {:.0f} us + {:.2f} GB/s\n\n",
             microbatch, 1e6 * links.p2p.latency_s, links.p2p.bandwidth / 1e9);
  fmt::print("| schedule | m | measured bubble | simulated (measured action times) | closed form (p-1)/(m+p-1) |\n");
  fmt::print("|---|---|---|---|---|\n");
  const auto dir = fs::temp_directory_path() / "pipetrain_bubble";
  for (const std::string name : {"gpipe", "1f1b"}) {
    for (int m : {2, 4, 8}) {
      fs::remove_all(dir);
      const std::string command = fmt::format(
          "{}/pipetrain train --quiet --run-dir {} --train.threads 1 --train.steps {} "
          "--train.batch_size {} --stages 2 --schedule {} --microbatches {} --eval.every 0 "
          "--eval.batches 1 --sample.tokens 0 > /dev/null 2>&1",
          PIPETRAIN_BINARY_DIR, dir.string(), steps, microbatch * m, name, m);
      if (std::system(command.c_str()) != 0) {
        fmt::print(stderr, "failed: {}\n", command);
        return 1;
      }
      const Measured measured = measure(nlohmann::json::parse(read_file((dir / "trace.json").string())), 5);
      sim::CostModel costs;
      costs.stages = measured.stages;
      for (auto& stage : costs.stages) stage.transfer_bytes = activation_bytes;
      costs.p2p_latency_ms = 1e3 * links.p2p.latency_s;
      costs.bandwidth_bytes_per_ms = links.p2p.bandwidth / 1e3;
      schedule::ScheduleSpec spec;
      spec.name = name;
      spec.stages = 2;
      spec.microbatches = m;
      const auto simulated = sim::simulate(schedule::make_schedule(spec), costs);
      double predicted = 0;
      for (double b : simulated.bubble_fraction) predicted += b / double(simulated.bubble_fraction.size());
      fmt::print("| {} | {} | {:.1f}% | {:.1f}% | {:.1f}% |\n", name, m, 100 * measured.bubble,
                 100 * predicted, 100.0 / (m + 1));
      std::fflush(stdout);
    }
  }
  fs::remove_all(dir);
  return 0;
}
