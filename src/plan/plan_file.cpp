#include "plan/plan_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/config.h"
#include "core/error.h"
#include "schedule/catalogue.h"

namespace pipetrain::plan {
namespace {

// A count in the plan: a whole number (2.5 layers would be cut to 2 without a word).
int64_t whole(const nlohmann::json& value, const std::string& what, const std::string& origin) {
  if (!value.is_number_integer()) fail("{}: {} must be a whole number, got {}", origin, what, value.dump());
  return value.get<int64_t>();
}

std::vector<int64_t> whole_list(const nlohmann::json& values, const std::string& what,
                                const std::string& origin) {
  if (!values.is_array()) fail("{}: {} must be a list of whole numbers, got {}", origin, what, values.dump());
  std::vector<int64_t> out;
  for (const auto& value : values) out.push_back(whole(value, what, origin));
  return out;
}

using Fields = std::vector<std::pair<std::string, std::string>>;

std::string text(int64_t value) { return std::to_string(value); }

// A GPT plan's model shape as config fields.
Fields gpt_shape_fields(const nlohmann::json& shape, const std::string& origin) {
  const auto size = [&](const char* key) { return text(whole(shape.at(key), key, origin)); };
  return {{"model.layers", size("layers")},
          {"model.d_model", size("hidden")},
          {"model.heads", size("heads")},
          {"model.seq_len", size("seq_len")},
          {"model.vocab_size", size("vocab")}};
}

// pipeline.chunks and pipeline.partition: a chunked schedule's runtime takes the p x v model
// stages' counts (older plans: its balanced cut), the others the stages' counts.
Fields partition_fields(const nlohmann::json& plan, int64_t chunks, int64_t stages,
                        const std::vector<int64_t>& partition, const std::string& origin) {
  if (chunks == 1) return {{"pipeline.chunks", "1"}, {"pipeline.partition", fmt::format("{}", fmt::join(partition, ","))}};
  const auto chunked =
      whole_list(plan.value("chunk_partition", nlohmann::json::array()), "chunk_partition", origin);
  if (!chunked.empty() && int64_t(chunked.size()) != chunks * stages) {
    fail("{}: inconsistent plan ({} chunk partition counts for {} stages x {} chunks)", origin,
         chunked.size(), stages, chunks);
  }
  return {{"pipeline.chunks", text(chunks)},
          {"pipeline.partition", chunked.empty() ? "balanced" : fmt::format("{}", fmt::join(chunked, ","))}};
}

}  // namespace

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
    const auto stages = whole(plan.at("stages"), "stages", origin);
    const auto width = whole(plan.at("dp_width"), "dp_width", origin);
    const auto micro = whole(plan.at("microbatch_size"), "microbatch_size", origin);
    const auto microbatches = whole(plan.at("microbatches"), "microbatches", origin);
    const auto partition = whole_list(plan.at("partition"), "partition", origin);
    if (stages < 1 || width < 1 || micro < 1 || microbatches < 1 ||
        int64_t(partition.size()) != stages) {
      fail("{}: inconsistent plan (stages {}, dp_width {}, microbatch {} x {}, {} partition counts)",
           origin, stages, width, micro, microbatches, partition.size());
    }
    Fields fields = gpt ? gpt_shape_fields(plan.at("model_shape"), origin) : Fields{};
    // The planned config's own fields (`plan --config` overrides, chunked cross-entropy) first:
    // what the plan decides below wins over them.
    for (auto& field : config_fields_from_json(plan, origin)) fields.push_back(std::move(field));
    const Fields run_fields = {
        {"pipeline.schedule", schedule},
        {"pipeline.stages", text(stages)},
        {"pipeline.dp_width", text(width)},
        {"train.microbatches", text(microbatches)},
        {"train.batch_size", text(micro * microbatches * width)},
        {"pipeline.recompute", plan.at("recompute").get<bool>() ? "all" : "none"}};
    fields.insert(fields.end(), run_fields.begin(), run_fields.end());
    const Fields partitions = partition_fields(plan, entry->planner.chunks, stages, partition, origin);
    fields.insert(fields.end(), partitions.begin(), partitions.end());
    return fields;
  } catch (const nlohmann::json::exception& error) {
    fail("{}: malformed plan: {}", origin, error.what());
  }
}

std::vector<std::pair<std::string, std::string>> config_fields_from_json(const nlohmann::json& file,
                                                                         const std::string& origin) {
  std::vector<std::pair<std::string, std::string>> fields;
  const nlohmann::json given = file.value("config_fields", nlohmann::json::object());
  if (!given.is_object()) fail("{}: config_fields must be an object of \"section.field\": \"value\"", origin);
  for (const auto& field : given.items()) {
    if (!field.value().is_string()) {
      fail("{}: config_fields' '{}' must be a string, got {}", origin, field.key(), field.value().dump());
    }
    if (find_field(field.key()) == nullptr) {
      fail("{}: config_fields names an unknown config field '{}'", origin, field.key());
    }
    Config check;
    try {
      set_field_from_string(check, field.key(), field.value().get<std::string>());
    } catch (const UserError& error) {
      fail("{}: in config_fields, {}", origin, error.what());
    }
    fields.push_back({field.key(), field.value().get<std::string>()});
  }
  return fields;
}

nlohmann::json config_fields_to_json(const std::vector<std::pair<std::string, std::string>>& fields) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [key, value] : fields) object[key] = value;
  return object;
}

}  // namespace pipetrain::plan
