#include <string>

#include "cli/commands.h"
#include "core/text.h"

namespace pipetrain::cli {
namespace {

CLI::Validator plain_number(bool whole) {
  return CLI::Validator(
      [whole](std::string& value) -> std::string {
        if (whole) {
          if (parse_int(value)) return "";  // (an int option's range: run_cli names it)
          return "expected a whole number (plain decimal), got '" + value + "'";
        }
        if (parse_double(value)) return "";
        return "expected a finite number (plain decimal, such as 2.5 or 1e-3), got '" + value + "'";
      },
      "");
}

}  // namespace

void require_plain_numbers(CLI::App& app) {
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type.rfind("INT", 0) == 0 || type.rfind("UINT", 0) == 0) option->check(plain_number(true));
    if (type.rfind("FLOAT", 0) == 0) option->check(plain_number(false));
  }
  for (CLI::App* command : app.get_subcommands([](CLI::App*) { return true; })) require_plain_numbers(*command);
}

}  // namespace pipetrain::cli
