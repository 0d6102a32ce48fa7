#include "model/edit_distance.h"

#include <algorithm>

namespace pipetrain {

// One row of the dynamic programme at a time: row[j] = distance(hypothesis[:i], reference[:j]).
int64_t edit_distance(const std::vector<int64_t>& hypothesis,
                      const std::vector<int64_t>& reference) {
  std::vector<int64_t> row(reference.size() + 1);
  for (size_t j = 0; j < row.size(); ++j) row[j] = int64_t(j);
  for (size_t i = 1; i <= hypothesis.size(); ++i) {
    int64_t diagonal = row[0];
    row[0] = int64_t(i);
    for (size_t j = 1; j <= reference.size(); ++j) {
      const int64_t substitution = diagonal + (hypothesis[i - 1] == reference[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({substitution, row[j] + 1, row[j - 1] + 1});
    }
  }
  return row.back();
}

}  // namespace pipetrain
