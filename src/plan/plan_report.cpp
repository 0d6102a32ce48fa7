#include "plan/plan_report.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "core/text.h"
#include "plan/plan_file.h"

namespace pipetrain::plan {
namespace {

std::string parameter_text(double parameters) {
  if (parameters < 1e4) return fmt::format("{:.0f}", parameters);
  return parameters >= 1e9 ? fmt::format("{:.2f}B", parameters / 1e9) : fmt::format("{:.2f}M", parameters / 1e6);
}

std::string devices_text(const PlanRequest& request) {
  const auto& counts = request.worker_counts;
  if (counts.empty()) return fmt::format("{} devices", request.cluster.devices());
  if (request.cluster.cores_per_node > 0) {
    return fmt::format("{}-{} workers on {} cores", counts.front(), counts.back(), request.cluster.cores_per_node);
  }
  return fmt::format("{}-{} workers on one node", counts.front(), counts.back());
}

std::string report_header(const PlanRequest& request, const PlanResult& result) {
  // (An infeasible candidate without a peak broke a schedule's rule before memory was counted.)
  const auto ruled_out = std::count_if(result.infeasible.begin(), result.infeasible.end(),
                                       [](const PlanCandidate& c) { return c.peak_memory_bytes <= 0; });
  return fmt::format(
      "model {} ({} parameters), cluster {} ({}, {} per device), global batch {}\n"
      "{} candidate plans fit in memory{}, {} do not; {} break a schedule's rules\n\n",
      request.model.name, parameter_text(planned_parameters(request)), request.cluster.name,
      devices_text(request), format_bytes(request.cluster.device_memory_bytes), request.global_batch,
      result.ranked.size(),
      request.cuda_graphs ? " (with train.cuda_graphs' memory pools: docs/planning.md)" : "",
      int64_t(result.infeasible.size()) - int64_t(ruled_out), ruled_out);
}

std::string ranked_table(const PlanRequest& request, const PlanResult& result, int top) {
  const bool variants = request.model_variants.size() > 1;
  std::string out = fmt::format(
      "| rank | schedule | d | w | b | m | recompute |{} samples/s | peak memory | lost because |\n",
      variants ? " model |" : "");
  out += fmt::format("|---|---|---|---|---|---|---|{}---|---|---|\n", variants ? "---|" : "");
  for (size_t i = 0; i < result.ranked.size() && static_cast<int>(i) < top; ++i) {
    const auto& c = result.ranked[i];
    const std::string model =
        variants ? " " + request.model_variants[size_t(c.variant)].label + " |" : std::string();
    out += fmt::format("| {} | {} | {} | {} | {} | {} | {} |{} {:.3g} | {} | {} |\n", i + 1, c.schedule,
                       c.stages, c.dp_width, c.microbatch, c.microbatches, c.recompute ? "yes" : "no",
                       model, c.samples_per_s, format_bytes(c.peak_memory_bytes), c.lost_because);
  }
  return out;
}

// Depths at which a schedule fits nowhere (any microbatch size, with or without recomputation),
// each with the least memory one of its candidates needed; "" when there are none.
std::string misfits_table(const PlanResult& result) {
  std::map<std::pair<std::string, int>, const PlanCandidate*> closest;
  for (const auto& c : result.infeasible) {
    if (c.peak_memory_bytes <= 0) continue;  // rejected for a rule, not for memory
    auto& slot = closest[{c.schedule, c.stages}];
    if (slot == nullptr || c.peak_memory_bytes < slot->peak_memory_bytes) slot = &c;
  }
  std::string rows;
  for (const auto& [key, c] : closest) {
    const bool fits_somewhere = std::any_of(result.ranked.begin(), result.ranked.end(), [&](const PlanCandidate& r) {
      return r.schedule == key.first && r.stages == key.second;
    });
    if (fits_somewhere) continue;
    rows += fmt::format("| {} | {} | {} | {} |\n", key.second == 1 ? "data parallel" : key.first,
                        key.second, c->dp_width, format_bytes(c->peak_memory_bytes));
  }
  if (rows.empty()) return "";
  return "\nDoes not fit in device memory at any microbatch size, with or without recomputation:\n\n"
         "| schedule | d | w | least memory needed |\n|---|---|---|---|\n" + rows;
}

// What a run of the plan needs of the model: a GPT's shape, or (any other model, whose run
// keeps its config's model) the names of the layers planned; and the config fields of the
// variant chosen or of the profile's model.
void describe_model(const PlanRequest& request, const PlanCandidate& plan, nlohmann::json& json) {
  if (!request.model_kind.empty()) json["model_kind"] = request.model_kind;  // `train --plan` checks it
  // Applied by `train --plan`, the last of a key winning.
  const auto* config_fields = !request.model_variants.empty()
                                  ? &request.model_variants.at(size_t(plan.variant)).config_fields
                                  : request.profile ? &request.profile->config_fields : nullptr;
  if (config_fields != nullptr && !config_fields->empty()) json["config_fields"] = config_fields_to_json(*config_fields);
  if (request.has_gpt_shape()) {
    const GptShape& shape = request.model;
    json["model_shape"] = {{"layers", shape.layers}, {"hidden", shape.hidden}, {"heads", shape.heads},
                           {"seq_len", shape.seq_len}, {"vocab", shape.vocab}};
    return;
  }
  std::vector<std::string> names;
  if (!request.model_variants.empty()) {
    for (const auto& layer : request.model_variants.front().costs(1)) names.push_back(layer.name);
  } else {
    for (const auto& layer : request.profile->layers) names.push_back(layer.name);
  }
  json["model_layers"] = names;
}

}  // namespace

double least_memory_needed(const PlanResult& result) {
  double least = 0;
  for (const auto& c : result.infeasible) {
    if (c.peak_memory_bytes > 0 && (least == 0 || c.peak_memory_bytes < least)) least = c.peak_memory_bytes;
  }
  return least;
}

std::string format_plan_report(const PlanRequest& request, const PlanResult& result, int top) {
  return report_header(request, result) + ranked_table(request, result, top) + misfits_table(result);
}

nlohmann::json plan_to_json(const PlanRequest& request, const PlanCandidate& plan) {
  nlohmann::json json = {{"format", "pipetrain-plan-1"},
          {"model", request.model.name},
          {"cluster", request.cluster.name},
          {"global_batch", request.global_batch},
          {"schedule", plan.schedule},
          {"stages", plan.stages},                {"dp_width", plan.dp_width},
          {"microbatch_size", plan.microbatch},   {"microbatches", plan.microbatches},
          {"recompute", plan.recompute},          {"partition", plan.partition},
          {"chunk_partition", plan.chunk_partition},
          {"predicted_samples_per_s", plan.samples_per_s},
          {"predicted_peak_memory_bytes", plan.peak_memory_bytes},
          {"predicted_iteration_s", plan.iteration_s},
          {"predicted_worker_memory_bytes", plan.worker_memory_bytes},
          // Included in each worker's prediction: subtracted, the rest compares with the tensors.
          {"predicted_worker_overhead_bytes", request.cluster.worker_overhead_bytes}};
  describe_model(request, plan, json);
  return json;
}

}  // namespace pipetrain::plan
