#include "cli/plan_check.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/text.h"
#include "plan/plan_file.h"
#include "profile/layer_profile.h"

namespace pipetrain::cli {
namespace {

struct Measured {
  int64_t logged = 0;                // steps logged
  std::vector<double> step_seconds;  // per logged step from step 3 on (the first two fill the
                                     // allocator's and the transport's buffers)
  int64_t first = 0, last = 0;       // those steps' numbers
  std::vector<double> peak_mib;      // per rank, the largest over the logged steps
};

Measured read_metrics(const std::string& run_dir) {
  Measured measured;
  std::ifstream in(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!record.is_object() || !record.contains("step_seconds")) continue;
    const int64_t step = record.value("step", int64_t(0));
    ++measured.logged;
    if (step > 2) {
      measured.step_seconds.push_back(record["step_seconds"].get<double>());
      if (measured.first == 0) measured.first = step;
      measured.last = step;
    }
    if (!record.contains("mem_peak_mb")) continue;
    const auto& peaks = record["mem_peak_mb"];
    measured.peak_mib.resize(std::max(measured.peak_mib.size(), peaks.size()), 0.0);
    for (size_t rank = 0; rank < peaks.size(); ++rank) {
      measured.peak_mib[rank] = std::max(measured.peak_mib[rank], peaks[rank].get<double>());
    }
  }
  return measured;
}

std::string percent(double measured, double predicted) {
  return fmt::format("{:+.1f}%", 100 * (predicted - measured) / measured);
}

}  // namespace

void require_plan_for_model(const nlohmann::json& plan, const std::string& plan_path, const Config& config) {
  const std::string kind = plan.value("model_kind", "");
  if (!kind.empty() && kind != config.model.kind) {
    fail("{} is a plan for a {} model, but this run's model.kind is {}: give the run config the plan "
         "was made from", plan_path, kind, config.model.kind);
  }
}

std::vector<std::string> plan_fields_overridden(const nlohmann::json& plan, const std::string& plan_path,
                                                const Config& config) {
  // The plan's fields as `train --plan` applies them: in order, the last value of a key winning
  // (its planned config's overrides come before what it decided).
  std::map<std::string, std::string> planned_values;
  for (const auto& [key, value] : plan::plan_config_overrides(plan, plan_path)) planned_values[key] = value;
  std::vector<std::string> changed;
  for (const auto& [key, value] : planned_values) {
    const FieldSpec* field = find_field(key);
    if (field == nullptr) continue;
    Config planned = config;
    set_field_from_string(planned, key, value);
    const std::string ran = field_value_string(config, *field), wanted = field_value_string(planned, *field);
    if (ran != wanted) changed.push_back(fmt::format("{} {} (the plan's {})", key, ran, wanted));
  }
  return changed;
}

std::string plan_check(const nlohmann::json& plan, const std::string& plan_path, const std::string& run_dir,
                       const std::vector<std::string>& overridden) {
  const Measured measured = read_metrics(run_dir);
  if (measured.logged == 0) return "";
  if (!overridden.empty()) {
    return fmt::format("against the plan ({}): not compared, the run changed what it planned: {}\n", plan_path,
                       fmt::join(overridden, ", "));
  }
  const double predicted_step = plan.value("predicted_iteration_s", 0.0);
  std::string out = fmt::format("against the plan ({}): ", plan_path);
  if (measured.step_seconds.empty() || predicted_step <= 0) {
    out += "step time not compared (no step logged after step 2, or a plan without a prediction)\n";
  } else {
    const double step = profile::median_of(measured.step_seconds);
    out += fmt::format("step time {:.3g} s measured (median of {} logged steps, {}-{}), {:.3g} s predicted ({})\n",
                       step, measured.step_seconds.size(), measured.first, measured.last, predicted_step,
                       percent(step, predicted_step));
  }
  const auto predicted = plan.value("predicted_worker_memory_bytes", std::vector<double>{});
  if (predicted.empty() || measured.peak_mib.empty()) return out;
  const double overhead = plan.value("predicted_worker_overhead_bytes", 0.0);
  const size_t stages = predicted.size();
  for (size_t rank = 0; rank < measured.peak_mib.size(); ++rank) {
    const double planned = (predicted[rank % stages] - overhead) / (1024.0 * 1024.0);
    const std::string who = measured.peak_mib.size() > stages
                                ? fmt::format("rank {} (replica {} worker {})", rank, rank / stages, rank % stages)
                                : fmt::format("worker {}", rank);
    constexpr double kMiB = 1024.0 * 1024.0;
    out += fmt::format("  {}: tensors peaked at {}, {} predicted ({})\n", who, format_bytes(kMiB * measured.peak_mib[rank]),
                       format_bytes(kMiB * planned), percent(measured.peak_mib[rank], planned));
  }
  return out;
}

}  // namespace pipetrain::cli
