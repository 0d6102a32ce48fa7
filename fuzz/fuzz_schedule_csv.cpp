// libFuzzer target: the schedule CSV reader, then the validator and the text renderer on
// whatever it accepts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "schedule/text_format.h"
#include "schedule/validate.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto schedule = pipetrain::schedule::parse_csv(text);
    (void)pipetrain::schedule::validate(schedule);
    (void)pipetrain::schedule::format_grid(schedule);
  } catch (const pipetrain::UserError&) {
  }
  return 0;
}
