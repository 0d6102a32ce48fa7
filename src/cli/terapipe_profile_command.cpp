// `pipetrain terapipe-profile`: measure the token-slice latency t(l, c) of the configured GPT on
// this machine and fit TeraPipe's model to it; `terapipe-plan --profile` plans from the file.
#include <limits>

#include <fmt/format.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/preflight.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "profile/slice_profile.h"

namespace pipetrain::cli {

void add_terapipe_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "terapipe-profile", "Measure forward+backward time of a token slice of l tokens after c "
                          "cached ones (one transformer block of the configured GPT) and fit "
                          "t(l,c) = t(l,0) + a l + b c + g l c ([CONFIG.toml] [--section.field "
                          "VALUE ...] --out slices.json [--batch 1] [--repeats 7] [--threads 1])");
  cmd->footer(
      "Config fields (the model) as for train: CONFIG.toml and --section.field VALUE.\n"
      "  --out FILE    the slice profile JSON to write (required; terapipe-plan --profile reads it)\n"
      "  --batch B     sequences per slice (default 1)\n"
      "  --repeats N   timings per grid point, the median kept (default 7)\n"
      "  --threads N   intra-op threads (default 1)");
  cmd->prefix_command();
  cmd->callback([cmd] {
    const auto arguments = parse_config_arguments(
        cmd->remaining(), {"--out", "--batch", "--repeats", "--threads"}, {});
    const Config config = resolve_config(arguments);
    const auto out = arguments.options.find("--out");
    if (out == arguments.options.end()) fail("terapipe-profile: --out FILE is required");
    require_writable_output(out->second, "--out");  // before the measuring
    profile::SliceProfileOptions options;
    options.batch = positive_option(arguments, "--batch", 1, std::numeric_limits<int>::max());
    options.repeats = int(positive_option(arguments, "--repeats", 7, kMaxRepeats));
    options.threads = int(positive_option(arguments, "--threads", 1, most_compute_threads()));
    const auto report = [](const std::string& line) { fmt::print(stderr, "terapipe-profile: {}\n", line); };
    const plan::SliceProfile measured = profile::profile_token_slices(config, options, report);
    const auto& fit = measured.fit;
    fmt::print("fit per block: t(l,c) = t(l,0) + {:.3e} l + {:.3e} c + {:.3e} l c  (seconds)\n",
               fit.per_token, fit.per_context, fit.per_token_context);
    fmt::print("fit error over {} grid points: mean {:.1f}%, max {:.1f}%\n", measured.points.size(),
               100 * fit.mean_error, 100 * fit.max_error);
    write_file_atomically(out->second, plan::to_json(measured).dump(2) + "\n");
    fmt::print("wrote {}\n", out->second);
  });
}

}  // namespace pipetrain::cli
