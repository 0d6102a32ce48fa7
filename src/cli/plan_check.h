#pragma once
// After `pipetrain train --plan plan.json`: the plan's predictions against what the run measured
// (its metrics.jsonl): the step time (median of the steps after the first two) and, on pipeline
// workers, each worker's tensor peak, so a user sees at once whether the plan held.
#include <string>

#include <nlohmann/json.hpp>

namespace pipetrain::cli {

// Lines to print: "against the plan (PATH): step time ..." then one per worker; "" when the run
// folder has no logged step. Memory compares the allocator's peak with the plan's worker memory
// less its per-worker overhead (`predicted_worker_overhead_bytes`); replicas share their stage's.
std::string plan_check(const nlohmann::json& plan, const std::string& plan_path, const std::string& run_dir);

}  // namespace pipetrain::cli
