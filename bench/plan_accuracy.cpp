// Predicted vs measured iteration time on this machine: profile the default GPT's layers
// (1 thread, as each worker gets), predict each configuration's step with the simulator, run it
// for real with `pipetrain train`, and print both. Also: which configuration the prediction would
// pick, and how fast it really is compared with the fastest measured one.
//   ./build/bench/plan_accuracy [--steps 30]   (the first 10 steps are warm-up, not timed)
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "core/machine.h"
#include "io/metrics.h"
#include "plan/planner.h"
#include "plan/profile_json.h"
#include "profile/layer_profile.h"
#include "profile/link_profile.h"
#include "runtime/run_spec.h"
#include "schedule/generators.h"
#include "sim/simulator.h"

using namespace pipetrain;

namespace {

struct Case {
  int stages;
  int64_t microbatches, microbatch;
  double predicted_ms = 0, measured_ms = 0;
};

double predict_ms(const plan::ModelProfile& profile, const Config& config, const Case& c) {
  const auto layers = plan::layer_costs(profile, c.microbatch);
  sim::CostModel costs;
  costs.stages.clear();
  costs.p2p_latency_ms = 1e3 * profile.links.p2p.latency_s;  // measured by measure_local_links
  costs.bandwidth_bytes_per_ms = profile.links.p2p.bandwidth / 1e3;
  costs.synchronous_updates = true;  // as the runtime's updates are
  for (const auto& range : runtime::make_run_spec(config).ranges) {  // the runtime's partition
    costs.stages.push_back(plan::model_stage_cost(layers, int(range.first), int(range.last - range.first)));
  }
  schedule::ScheduleSpec spec;
  spec.name = "1f1b";
  spec.stages = c.stages;
  spec.microbatches = static_cast<int>(c.microbatches);
  return sim::simulate(schedule::make_schedule(spec), costs).iteration_ms;
}

double measure_ms(const Config& config, const Case& c, int64_t steps) {
  const auto dir = std::filesystem::temp_directory_path() / "pipetrain_plan_accuracy";
  std::filesystem::remove_all(dir);
  std::string command = fmt::format(
      "{}/pipetrain train --quiet --run-dir {} --train.threads 1 --train.steps {} "
      "--train.batch_size {} --train.microbatches {} --eval.every 0 --eval.batches 1 "
      "--sample.tokens 0 --log.every 1",
      PIPETRAIN_BINARY_DIR, dir.string(), steps, c.microbatch * c.microbatches, c.microbatches);
  command += fmt::format(" --stages {} --schedule 1f1b", c.stages);  // the default is 2 stages
  if (std::system((command + " > /dev/null 2>&1").c_str()) != 0) {
    fmt::print(stderr, "failed: {}\n", command);
    return 0;
  }
  std::vector<double> seconds;
  for (const auto& record : read_metrics((dir / "metrics.jsonl").string())) {
    if (record["step"].get<int64_t>() > 10) seconds.push_back(record["step_seconds"].get<double>());
  }
  std::sort(seconds.begin(), seconds.end());
  (void)config;
  return seconds.empty() ? 0 : 1e3 * seconds[seconds.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  keep_freed_memory_in_process();
  int64_t steps = 30;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--steps") steps = std::atoll(argv[i + 1]);
  }
  if (steps <= 10) {
    fmt::print(stderr, "--steps must be above 10: the first 10 steps are warm-up\n");
    return 2;
  }
  Config config;  // the default GPT
  profile::ProfileOptions options;
  options.microbatch_sizes = {4, 16};
  plan::ModelProfile profile = profile::profile_model_layers(config, options, nullptr);
  profile.links = profile::measure_local_links(25);
  fmt::print("measured p2p link: {:.0f} us + {:.2f} GB/s\n\n", 1e6 * profile.links.p2p.latency_s,
             profile.links.p2p.bandwidth / 1e9);
  std::vector<Case> cases;
  for (int stages : {1, 2})
    for (int64_t m : {1, 2, 4, 8})
      for (int64_t b : {4, 16}) cases.push_back({stages, m, b});
  fmt::print("| p | m | b | batch | predicted ms/step | measured ms/step | error | predicted tok/s | measured tok/s |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  for (auto& c : cases) {
    Config run = config;
    run.pipeline.stages = c.stages;
    c.predicted_ms = predict_ms(profile, run, c);
    c.measured_ms = measure_ms(run, c, steps);
    const double tokens = double(c.microbatch * c.microbatches * config.model.seq_len);
    fmt::print("| {} | {} | {} | {} | {:.1f} | {:.1f} | {:+.1f}% | {:.0f} | {:.0f} |\n", c.stages,
               c.microbatches, c.microbatch, c.microbatch * c.microbatches, c.predicted_ms,
               c.measured_ms, 100 * (c.predicted_ms / c.measured_ms - 1), 1e3 * tokens / c.predicted_ms,
               1e3 * tokens / c.measured_ms);
    std::fflush(stdout);
  }
  // The planner's question: which configuration is fastest (tokens/s) by prediction, and how
  // does it really compare with the fastest measured one?
  auto rate = [&](const Case& c, double ms) { return double(c.microbatch * c.microbatches) / ms; };
  const auto chosen = std::max_element(cases.begin(), cases.end(), [&](const Case& a, const Case& b) {
    return rate(a, a.predicted_ms) < rate(b, b.predicted_ms);
  });
  const auto best = std::max_element(cases.begin(), cases.end(), [&](const Case& a, const Case& b) {
    return rate(a, a.measured_ms) < rate(b, b.measured_ms);
  });
  fmt::print("\npredicted best: p={} m={} b={}; it measured {:.1f}% of the best measured (p={} m={} b={})\n",
             chosen->stages, chosen->microbatches, chosen->microbatch,
             100 * rate(*chosen, chosen->measured_ms) / rate(*best, best->measured_ms), best->stages,
             best->microbatches, best->microbatch);
  return 0;
}
