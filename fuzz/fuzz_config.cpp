// libFuzzer target: the TOML config parser and validation must turn any input into a Config or
// a UserError, never a crash, hang or sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const pipetrain::Config config = pipetrain::parse_config_toml(text, "fuzz.toml");
    pipetrain::validate(config);
    (void)pipetrain::to_toml(config);
  } catch (const pipetrain::UserError&) {
  }
  return 0;
}
