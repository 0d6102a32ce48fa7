#include "plan/plan_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "schedule/catalogue.h"

namespace pipetrain::plan {

std::vector<std::pair<std::string, std::string>> plan_config_overrides(const nlohmann::json& plan,
                                                                       const std::string& origin) {
  try {
    if (plan.value("format", "") != "pipetrain-plan-1") {
      fail("{}: not a pipetrain plan (write one with `pipetrain plan ... --out {}`)", origin, origin);
    }
    // A GPT plan names its shape; a plan of another model (`plan --config`) has none: the
    // run's own config gives the model.
    const bool gpt = plan.contains("model_shape");
    const auto schedule = plan.at("schedule").get<std::string>();
    const schedule::ScheduleEntry* entry = schedule::find_schedule(schedule);
    if (entry == nullptr) fail("{}: plan of an unknown schedule '{}'", origin, schedule);
    const auto stages = plan.at("stages").get<int64_t>(), width = plan.at("dp_width").get<int64_t>();
    const auto micro = plan.at("microbatch_size").get<int64_t>();
    const auto microbatches = plan.at("microbatches").get<int64_t>();
    const auto partition = plan.at("partition").get<std::vector<int64_t>>();
    if (stages < 1 || width < 1 || micro < 1 || microbatches < 1 ||
        int64_t(partition.size()) != stages) {
      fail("{}: inconsistent plan (stages {}, dp_width {}, microbatch {} x {}, {} partition counts)",
           origin, stages, width, micro, microbatches, partition.size());
    }
    const auto text = [](int64_t v) { return std::to_string(v); };
    std::vector<std::pair<std::string, std::string>> fields;
    if (gpt) {
      const auto& shape = plan.at("model_shape");
      fields = {{"model.layers", text(shape.at("layers").get<int64_t>())},
                {"model.d_model", text(shape.at("hidden").get<int64_t>())},
                {"model.heads", text(shape.at("heads").get<int64_t>())},
                {"model.seq_len", text(shape.at("seq_len").get<int64_t>())},
                {"model.vocab_size", text(shape.at("vocab").get<int64_t>())}};
    }
    // The planned config's own fields (`plan --config` overrides, chunked cross-entropy) first:
    // what the plan decides below wins over them.
    const nlohmann::json config_fields = plan.value("config_fields", nlohmann::json::object());
    for (const auto& field : config_fields.items()) {
      fields.push_back({field.key(), field.value().get<std::string>()});
    }
    const std::vector<std::pair<std::string, std::string>> run_fields = {
        {"pipeline.schedule", schedule},
        {"pipeline.stages", text(stages)},
        {"pipeline.dp_width", text(width)},
        {"train.microbatches", text(microbatches)},
        {"train.batch_size", text(micro * microbatches * width)},
        {"pipeline.recompute", plan.at("recompute").get<bool>() ? "all" : "none"}};
    fields.insert(fields.end(), run_fields.begin(), run_fields.end());
    const int64_t chunks = entry->planner.chunks;
    if (chunks > 1) {
      // The runtime takes the p x v model stages' counts (older plans: its balanced cut).
      const auto chunked = plan.value("chunk_partition", std::vector<int64_t>{});
      if (!chunked.empty() && int64_t(chunked.size()) != chunks * stages) {
        fail("{}: inconsistent plan ({} chunk partition counts for {} stages x {} chunks)", origin,
             chunked.size(), stages, chunks);
      }
      fields.push_back({"pipeline.chunks", text(chunks)});
      fields.push_back({"pipeline.partition",
                        chunked.empty() ? "balanced" : fmt::format("{}", fmt::join(chunked, ","))});
    } else {
      fields.push_back({"pipeline.chunks", "1"});
      fields.push_back({"pipeline.partition", fmt::format("{}", fmt::join(partition, ","))});
    }
    return fields;
  } catch (const nlohmann::json::exception& error) {
    fail("{}: malformed plan: {}", origin, error.what());
  }
}

}  // namespace pipetrain::plan
