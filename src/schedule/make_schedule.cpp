#include <functional>
#include <map>

#include "core/error.h"
#include "schedule/generators.h"

namespace pipetrain::schedule {
namespace {

using Generator = std::function<Schedule(const ScheduleSpec&)>;

const std::vector<std::pair<std::string, Generator>>& registry() {
  static const std::vector<std::pair<std::string, Generator>> generators = {
      {"gpipe", make_gpipe_schedule},         {"1f1b", make_1f1b_flush_schedule},
      {"2bw", make_2bw_schedule},             {"pipedream", make_pipedream_schedule},
      {"pipeoptim", make_pipeoptim_schedule}, {"spectrain", make_spectrain_schedule},
      {"interleaved", make_interleaved_schedule}, {"bfs", make_looped_bfs_schedule},
      {"zb-h1", make_zb_h1_schedule},
      {"2bw-predict", make_2bw_predict_schedule}, {"pipedream-nostash", make_pipedream_nostash_schedule},
  };
  return generators;
}

}  // namespace

const std::vector<std::string>& schedule_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : registry()) out.push_back(entry.first);
    return out;
  }();
  return names;
}

Schedule make_schedule(const ScheduleSpec& spec) {
  for (const auto& [name, generator] : registry()) {
    if (name == spec.name) return generator(spec);
  }
  std::string known;
  for (const auto& name : schedule_names()) known += (known.empty() ? "" : ", ") + name;
  fail("unknown schedule '{}' (known: {})", spec.name, known);
}

}  // namespace pipetrain::schedule
