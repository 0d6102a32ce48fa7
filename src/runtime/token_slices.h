#pragma once
// pipeline.slices: how each training sequence is cut into token slices (TeraPipe) that flow
// through the pipeline one after another. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::runtime {

struct TokenSlices {
  std::vector<int64_t> lengths;  // in sequence order; they sum to model.seq_len
  std::vector<int64_t> starts;   // first position of each slice

  int count() const { return int(lengths.size()); }
};

// "N": N near-equal slices (the first seq_len % N one token longer); "l1,l2,...": these lengths,
// which must sum to model.seq_len. Fails with one clear message otherwise. A run asks its
// RunSpec (runtime/run_spec.h), which calls this once.
TokenSlices parse_token_slices(const std::string& text, int64_t seq_len);

}  // namespace pipetrain::runtime
