#pragma once
// How a plan search is told: the ranked table `pipetrain plan` prints, and a chosen plan as the
// JSON file `train --plan` reads (docs/planning.md).
#include <string>

#include <nlohmann/json.hpp>

#include "plan/planner.h"

namespace pipetrain::plan {

// The least per-device memory any rejected candidate needed (0 if none was rejected for memory).
double least_memory_needed(const PlanResult& result);
// The request in a line, the counts, the best `top` candidates as a markdown table, and the
// depths at which a schedule fits nowhere.
std::string format_plan_report(const PlanRequest& request, const PlanResult& result, int top);
nlohmann::json plan_to_json(const PlanRequest& request, const PlanCandidate& plan);

}  // namespace pipetrain::plan
