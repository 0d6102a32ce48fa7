// 1F1B, interleaved, looped breadth-first, ZB-H1, ZB-H2, ZB-V and DualPipeV on real workers, at
// the same model and global batch: tokens/s, measured bubble vs the simulator's, peak memory per
// worker. Rounds run the schedules in turn (round-robin) and the table gives medians, since this
// machine drifts.
// The simulated bubble replays the schedule with the per-stage forward, backward (B and W for
// zero-bubble) and optimizer times measured in the same run's trace, and the measured p2p link.
//   ./build/bench/schedule_compare [--steps 20] [--rounds 3] [--microbatch 4] [--workers 2,4]
//                                  [--schedules 1f1b,interleaved,bfs,zb-h1,zb-h2,zb-v,dualpipev]
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/machine.h"
#include "core/text.h"
#include "profile/link_profile.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "sim/simulator.h"

using namespace pipetrain;
namespace fs = std::filesystem;

namespace {

constexpr int kBlocks = 6;  // 8 layers: interleaved and BFS at p = 4, v = 2 need 8 stages

struct Setup {
  std::string schedule;
  int workers, chunks, microbatches;
  std::string label() const { return fmt::format("{} p={} v={} m={}", schedule, workers, chunks, microbatches); }
};

struct Result {
  double tokens_per_s = 0, bubble = 0, simulated = 0;
  std::vector<double> peak_mb, held_mb;  // per worker
  std::vector<double> backward_ms;       // per stage: Backward, or B + W under zero-bubble
};

bool busy_kind(const std::string& kind) {
  return kind == "Forward" || kind == "Backward" || kind == "BackwardInput" ||
         kind == "BackwardWeight" || kind == "OptimizerStep";
}

// Bubble of the traced steps >= skip: per step and worker, the idle share of the step window
// (first action start to last action end on any worker; waits for an update's reductions,
// UpdateWait, are idle). Also each stage's mean action times.
double measure(const nlohmann::json& trace, int skip, int stages, std::vector<sim::StageCost>& costs) {
  std::map<int, std::map<int, std::pair<double, double>>> window;   // step -> lane -> busy, -
  std::map<int, std::pair<double, double>> span;                    // step -> begin, end
  std::map<std::pair<int, std::string>, std::pair<double, int>> sums;  // (stage, kind)
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X" || !e.contains("args") || !e["args"].contains("step")) continue;
    const int step = e["args"]["step"].get<int>();
    if (step < skip) continue;
    const std::string kind = e.at("cat");
    const double start = e.at("ts").get<double>() / 1e3, ms = e.at("dur").get<double>() / 1e3;
    auto& s = span.try_emplace(step, 1e300, -1e300).first->second;
    s = {std::min(s.first, start), std::max(s.second, start + ms)};
    auto& lane = window[step][e.at("pid").get<int>()];
    if (!busy_kind(kind)) continue;
    lane.first += ms;
    const int stage = std::stoi(e.at("name").get<std::string>());  // "3BI5": stage 3
    auto& sum = sums[{stage, kind}];
    sum = {sum.first + ms, sum.second + 1};
  }
  double bubble = 0;
  int counted = 0;
  for (const auto& [step, lanes] : window) {
    const double length = span[step].second - span[step].first;
    for (const auto& [lane, busy] : lanes) bubble += 1 - busy.first / length, ++counted;
  }
  costs.assign(size_t(stages), {});
  for (int s = 0; s < stages; ++s) {
    const auto mean = [&](const char* kind) {
      const auto it = sums.find({s, kind});
      return it == sums.end() ? 0.0 : it->second.first / it->second.second;
    };
    const double split = mean("BackwardInput") + mean("BackwardWeight");
    costs[s].forward_ms = mean("Forward");
    costs[s].backward_ms = split > 0 ? split : mean("Backward");
    costs[s].weight_ms = split > 0 ? mean("BackwardWeight") : mean("Backward") / 2;
    // An update traces its begin (at its action) and its apply apart: their sum per step.
    const auto update = sums.find({s, "OptimizerStep"});
    costs[s].optimizer_ms = update == sums.end() ? 0.0 : update->second.first / double(window.size());
  }
  return bubble / std::max(counted, 1);
}

Result run(const Setup& setup, int steps, int microbatch, const plan::LinkProfile& links) {
  const auto dir = fs::temp_directory_path() / "pipetrain_schedule_compare";
  fs::remove_all(dir);
  const std::string command = fmt::format(
      "{}/pipetrain train --quiet --run-dir {} --train.threads 1 --train.steps {} "
      "--train.batch_size {} --stages {} --pipeline.chunks {} --schedule {} --microbatches {} "
      "--model.layers {} --eval.every 0 --eval.batches 1 --sample.tokens 0 > /dev/null 2>&1",
      PIPETRAIN_BINARY_DIR, dir.string(), steps, microbatch * setup.microbatches, setup.workers,
      setup.chunks, setup.schedule, setup.microbatches, kBlocks);
  if (std::system(command.c_str()) != 0) throw std::runtime_error("failed: " + command);
  Result r;
  const auto summary = nlohmann::json::parse(read_file((dir / "summary.json").string()));
  r.tokens_per_s = summary.at("tokens_per_s").get<double>();
  const std::regex peak(R"(peak ([0-9.]+) MB)");
  for (const auto& line : summary.at("memory")) {
    std::smatch match;
    const std::string text = line.get<std::string>();
    if (std::regex_search(text, match, peak)) r.peak_mb.push_back(std::stod(match[1]));
  }
  for (const auto& held : summary.at("weight_pass_held_mb")) r.held_mb.push_back(held.get<double>());
  const int stages = setup.workers * setup.chunks;
  sim::CostModel costs;
  r.bubble = measure(nlohmann::json::parse(read_file((dir / "trace.json").string())), 5, stages, costs.stages);
  for (const auto& stage : costs.stages) r.backward_ms.push_back(stage.backward_ms);
  const double boundary_bytes = double(sizeof(float) * microbatch * 128 * 128);  // default model
  for (auto& stage : costs.stages) stage.transfer_bytes = boundary_bytes;
  costs.p2p_latency_ms = 1e3 * links.p2p.latency_s;
  costs.bandwidth_bytes_per_ms = links.p2p.bandwidth / 1e3;
  schedule::ScheduleSpec spec;
  spec.name = setup.schedule;
  spec.stages = setup.workers;
  spec.chunks = setup.chunks;
  spec.microbatches = setup.microbatches;
  const auto simulated = sim::simulate(schedule::make_schedule(spec), costs);
  for (double b : simulated.bubble_fraction) r.simulated += b / double(simulated.bubble_fraction.size());
  fs::remove_all(dir);
  return r;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Per worker (or per stage) medians over the rounds, " / "-separated.
std::string per_worker(const std::vector<Result>& rounds, std::vector<double> Result::*field) {
  std::vector<std::string> cells;
  for (size_t w = 0; w < (rounds.front().*field).size(); ++w) {
    std::vector<double> values;
    for (const auto& r : rounds) values.push_back((r.*field)[w]);
    cells.push_back(fmt::format("{:.1f}", median(values)));
  }
  return join(cells, " / ");
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_in_process();
  int steps = 20, rounds = 3, microbatch = 4;
  std::string workers = "2,4", schedules = "1f1b,interleaved,bfs,zb-h1,zb-h2,zb-v,dualpipev";
  for (int i = 1; i + 1 < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    if (flag == "--rounds") rounds = std::atoi(argv[i + 1]);
    if (flag == "--microbatch") microbatch = std::atoi(argv[i + 1]);
    if (flag == "--workers") workers = argv[i + 1];
    if (flag == "--schedules") schedules = argv[i + 1];
  }
  std::vector<Setup> setups;
  for (const auto& p_text : split(workers, ',')) {
    const int p = std::stoi(p_text), m = 2 * p;  // interleaved: m % p == 0; DualPipeV: m >= 2p
    for (const auto& name : split(schedules, ',')) {
      setups.push_back({name, p, schedule::schedule_entry(name).parameters.chunks ? 2 : 1, m});
    }
  }
  const auto links = profile::measure_local_links(25);
  fmt::print("default GPT with {} blocks, microbatch {} sequences, 1 thread per worker, {} steps "
             "(bubble over steps 6-{}), {} rounds; p2p link {:.0f} us + {:.2f} GB/s\n\n",
             kBlocks, microbatch, steps, std::min(steps, 20), rounds, 1e6 * links.p2p.latency_s,
             links.p2p.bandwidth / 1e9);
  std::vector<std::vector<Result>> results(setups.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t i = 0; i < setups.size(); ++i) {
      results[i].push_back(run(setups[i], steps, microbatch, links));
      fmt::print(stderr, "round {} {}: {:.0f} tokens/s\n", round + 1, setups[i].label(),
                 results[i].back().tokens_per_s);
    }
  }
  fmt::print("| schedule | p | v | m | tokens/s | measured bubble | simulated bubble | peak MB per worker | W-held MB per worker | backward ms per stage (B+W) |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t i = 0; i < setups.size(); ++i) {
    const auto& rs = results[i];
    const auto med = [&](double Result::*field) {
      std::vector<double> values;
      for (const auto& r : rs) values.push_back(r.*field);
      return median(values);
    };
    fmt::print("| {} | {} | {} | {} | {:.0f} | {:.1f}% | {:.1f}% | {} | {} | {} |\n", setups[i].schedule,
               setups[i].workers, setups[i].chunks, setups[i].microbatches, med(&Result::tokens_per_s),
               100 * med(&Result::bubble), 100 * med(&Result::simulated), per_worker(rs, &Result::peak_mb),
               per_worker(rs, &Result::held_mb), per_worker(rs, &Result::backward_ms));
  }
  return 0;
}
