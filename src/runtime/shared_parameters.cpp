#include "runtime/shared_parameters.h"

#include <set>

namespace pipetrain::runtime {

std::vector<std::vector<int>> workers_holding_shared(const Model& model,
                                                     const std::vector<StageRange>& ranges,
                                                     int workers, schedule::Placement placement) {
  std::vector<std::vector<int>> holders;
  for (const auto& shared : model.shared_parameters()) {
    std::set<int> found;
    for (const auto& copy : shared.copies) {
      for (size_t s = 0; s < ranges.size(); ++s) {
        if (ranges[s].first <= copy.layer && copy.layer < ranges[s].last) {
          found.insert(schedule::worker_at(placement, workers, int(s)));
        }
      }
    }
    holders.emplace_back(found.begin(), found.end());
  }
  return holders;
}

}  // namespace pipetrain::runtime
