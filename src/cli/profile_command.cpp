#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/arguments.h"
#include "cli/commands.h"
#include "cli/preflight.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "profile/layer_profile.h"
#include "profile/link_profile.h"

namespace pipetrain::cli {

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "profile", "Measure per-layer forward/backward/weight-gradient time of the configured model "
                 "([CONFIG.toml] [--section.field VALUE ...] --out profile.json "
                 "[--microbatch-sizes 1,2,4,8] [--repeats 5] [--threads 1])");
  cmd->footer(
      "Config fields (the model to profile) as for train: CONFIG.toml and --section.field VALUE.\n"
      "  --out FILE               the profile JSON to write (required; plan --profile reads it)\n"
      "  --microbatch-sizes LIST  microbatch sizes to time each layer at (default 1,2,4,8; a model\n"
      "                           with BatchNorm: the run's microbatch, the one size it plans)\n"
      "  --repeats N              timings per measurement, the median kept (default 5)\n"
      "  --threads N              intra-op threads, as each worker will run (default 1)");
  cmd->prefix_command();
  cmd->callback([cmd] {
    const auto arguments = parse_config_arguments(
        cmd->remaining(), {"--out", "--microbatch-sizes", "--repeats", "--threads"}, {});
    const Config config = resolve_config(arguments);
    const auto option = [&](const char* name, const std::string& fallback) {
      const auto it = arguments.options.find(name);
      return it == arguments.options.end() ? fallback : it->second;
    };
    const std::string out = option("--out", "");
    if (out.empty()) fail("profile: --out FILE is required");
    require_writable_output(out, "--out");  // before minutes of measuring
    profile::ProfileOptions options;
    const std::string sizes = option("--microbatch-sizes", "");  // (empty: the model's default)
    for (const auto& size : sizes.empty() ? std::vector<std::string>{} : split(sizes, ',')) {
      const auto value = parse_int(size);
      if (!value || *value < 1) fail("--microbatch-sizes: expected positive integers, got '{}'", size);
      if (std::count(options.microbatch_sizes.begin(), options.microbatch_sizes.end(), *value) > 0) {
        fail("--microbatch-sizes: {} is given twice", *value);
      }
      options.microbatch_sizes.push_back(*value);
    }
    options.repeats = int(positive_option(arguments, "--repeats", 5, kMaxRepeats));
    options.threads = int(positive_option(arguments, "--threads", 1, most_compute_threads()));
    const auto report = [](const std::string& line) { fmt::print(stderr, "profile: {}\n", line); };
    auto measured = profile::profile_model_layers(config, options, report);
    measured.config_fields = arguments.overrides;  // the model measured, which its plans carry
    // Links between this machine's processes (Gloo over loopback) describe a cluster of such
    // workers; a GPU pipeline's sends go over NCCL and NVLink, which processes sharing one GPU
    // cannot measure: its plans take the cluster file's links.
    if (measured.device == "cpu") {
      measured.links = profile::measure_local_links(std::max(options.repeats, 25));
      for (const auto& [name, fit] : {std::pair{"p2p send/recv", measured.links.p2p},
                                      std::pair{"2-worker all-reduce", measured.links.all_reduce},
                                      std::pair{"send post (sender busy)", measured.links.send_post}}) {
        report(fmt::format("{}: latency {:.1f} us, {:.2f} GB/s (fit within {:.0f}%)", name,
                           1e6 * fit.latency_s, fit.bandwidth / 1e9, 100 * fit.max_error));
      }
    } else {
      report(fmt::format("links not measured on {}: plans take the cluster file's", measured.device));
    }
    write_file_atomically(out, plan::to_json(measured).dump(2) + "\n");
    std::vector<int64_t> timed;
    for (const auto& m : measured.layers.front().by_microbatch) timed.push_back(m.microbatch);
    fmt::print("wrote {} ({} layers at microbatch sizes {})\n", out, measured.layers.size(), fmt::join(timed, ","));
  });
}

}  // namespace pipetrain::cli
