#pragma once
// model.rope_scaling: rotary position scaling as transformers' rope_parameters names it, in one
// string: "" (none, transformers' "default"), "linear:FACTOR" (positions divided by FACTOR) or
// "llama3:FACTOR,LOW_FREQ_FACTOR,HIGH_FREQ_FACTOR,ORIGINAL_CONTEXT" (Llama 3.1's bands).
#include <cstdint>
#include <string>

namespace pipetrain {

struct RopeScaling {
  enum class Kind { None, Linear, Llama3 } kind = Kind::None;
  double factor = 1, low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_context = 8192;
};

// UserError naming `origin` for a string that is none of the forms above.
RopeScaling parse_rope_scaling(const std::string& text, const std::string& origin);
std::string rope_scaling_text(const RopeScaling& scaling);  // parse_rope_scaling's inverse

}  // namespace pipetrain
