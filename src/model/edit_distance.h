#pragma once
// Levenshtein distance between two label sequences: the fewest substitutions, insertions and
// deletions turning `hypothesis` into `reference`. Character error rate = the sum of these over
// the sum of the references' lengths. Free of libtorch.
#include <cstdint>
#include <vector>

namespace pipetrain {

int64_t edit_distance(const std::vector<int64_t>& hypothesis,
                      const std::vector<int64_t>& reference);

}  // namespace pipetrain
