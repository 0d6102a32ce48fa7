#include "core/rope_scaling.h"

#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "core/text.h"

namespace pipetrain {
namespace {

std::vector<double> numbers_after(const std::string& text, size_t colon, size_t count,
                                  const std::string& origin) {
  std::vector<double> values;
  std::string rest = text.substr(colon + 1);
  size_t begin = 0;
  while (begin <= rest.size()) {
    const size_t comma = std::min(rest.find(',', begin), rest.size());
    const auto value = parse_double(rest.substr(begin, comma - begin));
    if (!value || !(*value > 0)) break;
    values.push_back(*value);
    begin = comma + 1;
  }
  if (values.size() != count) {
    fail("{}: model.rope_scaling '{}' needs {} positive number{} after the colon", origin, text,
         count, count == 1 ? "" : "s separated by commas");
  }
  return values;
}

}  // namespace

RopeScaling parse_rope_scaling(const std::string& text, const std::string& origin) {
  RopeScaling scaling;
  if (text.empty()) return scaling;
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  if (kind == "linear" && colon != std::string::npos) {
    scaling.kind = RopeScaling::Kind::Linear;
    scaling.factor = numbers_after(text, colon, 1, origin)[0];
  } else if (kind == "llama3" && colon != std::string::npos) {
    const auto values = numbers_after(text, colon, 4, origin);
    scaling.kind = RopeScaling::Kind::Llama3;
    scaling.factor = values[0];
    scaling.low_freq_factor = values[1];
    scaling.high_freq_factor = values[2];
    scaling.original_context = int64_t(values[3]);
    if (double(scaling.original_context) != values[3] || scaling.high_freq_factor <= scaling.low_freq_factor) {
      fail("{}: model.rope_scaling '{}': the original context must be a whole number and "
           "HIGH_FREQ_FACTOR above LOW_FREQ_FACTOR", origin, text);
    }
  } else {
    fail("{}: model.rope_scaling must be \"\", \"linear:FACTOR\" or "
         "\"llama3:FACTOR,LOW_FREQ_FACTOR,HIGH_FREQ_FACTOR,ORIGINAL_CONTEXT\", got '{}' (other "
         "kinds, e.g. transformers' dynamic, yarn or longrope, are not supported)", origin, text);
  }
  return scaling;
}

std::string rope_scaling_text(const RopeScaling& s) {
  switch (s.kind) {
    case RopeScaling::Kind::None: return "";
    case RopeScaling::Kind::Linear: return fmt::format("linear:{}", s.factor);
    case RopeScaling::Kind::Llama3:
      return fmt::format("llama3:{},{},{},{}", s.factor, s.low_freq_factor, s.high_freq_factor,
                         s.original_context);
  }
  return "";
}

}  // namespace pipetrain
