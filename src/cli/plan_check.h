#pragma once
// After `pipetrain train --plan plan.json`: the plan's predictions against what the run measured
// (its metrics.jsonl): the step time (median of the steps after the first two) and, on pipeline
// workers, each worker's tensor peak, so a user sees at once whether the plan held.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.h"

namespace pipetrain::cli {

// Before the run: UserError when the plan was made for another model.kind than the run's
// (a plan records it as `model_kind`; older plans are not checked).
void require_plan_for_model(const nlohmann::json& plan, const std::string& plan_path, const Config& config);

// The fields the plan sets that the run's config overrides, each as "key VALUE (the plan's
// VALUE)": the plan's predictions are not this run's then.
std::vector<std::string> plan_fields_overridden(const nlohmann::json& plan, const std::string& plan_path,
                                                const Config& config);

// Lines to print: "against the plan (PATH): step time ..." then one per worker; "" when the run
// folder has no logged step. Memory compares the allocator's peak with the plan's worker memory
// less its per-worker overhead (`predicted_worker_overhead_bytes`); replicas share their stage's.
// A run that overrode the plan's fields (`overridden`) is not compared: one line says which.
std::string plan_check(const nlohmann::json& plan, const std::string& plan_path, const std::string& run_dir,
                       const std::vector<std::string>& overridden);

}  // namespace pipetrain::cli
