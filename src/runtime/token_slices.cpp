#include "runtime/token_slices.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "core/text.h"

namespace pipetrain::runtime {
namespace {

TokenSlices from_lengths(std::vector<int64_t> lengths) {
  TokenSlices slices;
  int64_t start = 0;
  for (const int64_t length : lengths) {
    slices.starts.push_back(start);
    start += length;
  }
  slices.lengths = std::move(lengths);
  return slices;
}

}  // namespace

TokenSlices parse_token_slices(const std::string& text, int64_t seq_len) {
  std::vector<int64_t> values;
  for (const auto& part : split(text, ',')) {
    const auto value = parse_int(part);
    if (!value || *value < 1) {
      fail("pipeline.slices: expected a slice count or slice lengths like \"64,40,24\" "
           "(positive integers), got '{}'", text);
    }
    values.push_back(*value);
  }
  if (values.size() == 1) {  // a count
    const int64_t count = values[0];
    if (count > seq_len) fail("pipeline.slices: {} slices but model.seq_len is {}", count, seq_len);
    std::vector<int64_t> lengths;
    for (int64_t i = 0; i < count; ++i) lengths.push_back(seq_len / count + (i < seq_len % count));
    return from_lengths(lengths);
  }
  int64_t sum = 0;
  for (const int64_t v : values) sum += v;
  if (sum != seq_len) {
    fail("pipeline.slices: the lengths {} sum to {} but model.seq_len is {}",
         fmt::join(values, ","), sum, seq_len);
  }
  return from_lengths(values);
}

}  // namespace pipetrain::runtime
