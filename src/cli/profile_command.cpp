#include <algorithm>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/arguments.h"
#include "cli/clusters.h"
#include "cli/commands.h"
#include "cli/preflight.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "model/registry.h"
#include "profile/layer_profile.h"
#include "profile/link_profile.h"
#include "runtime/model_costs.h"

namespace pipetrain::cli {

namespace {

std::string percent_off(double predicted, double measured) {
  return measured > 0 ? fmt::format("{:+.0f}%", 100 * (predicted / measured - 1)) : "-";
}

// Each layer's measured times beside the analytic ones `plan --config` would take for a device
// of `cluster` (none given: this machine's, clusters/this-machine.toml, one core a worker), at
// the largest microbatch measured: how far a plan without a profile can be trusted, layer by
// layer.
void print_analytic_comparison(const Config& config, const plan::ModelProfile& measured,
                               const std::optional<plan::ClusterSpec>& given) {
  if (!given && (measured.device != "cpu" || measured.threads != 1)) {
    fmt::print(stderr, "profile: no comparison with the analytic costs: clusters/this-machine.toml "
                       "models one CPU core a worker, this profile ran on {} with {} threads "
                       "(--cluster NAME compares with that cluster's devices)\n",
               measured.device, measured.threads);
    return;
  }
  const plan::ClusterSpec cluster = given ? *given : load_cluster_option("this-machine");
  const int64_t rows = measured.layers.front().by_microbatch.back().microbatch;
  const auto analytic = runtime::model_plan_costs(
      *make_model(config), rows, runtime::model_cost_options(config, cluster));
  fmt::print("\nmeasured against the analytic costs of `plan --config` (cluster {}), microbatch {}:\n\n",
             cluster.name, rows);
  fmt::print("| layer | forward ms | analytic | off | backward ms | analytic | off |\n");
  fmt::print("|---|---|---|---|---|---|---|\n");
  const auto row = [](const std::string& name, double forward, double backward,
                      double forward_analytic, double backward_analytic) {
    fmt::print("| {} | {:.3g} | {:.3g} | {} | {:.3g} | {:.3g} | {} |\n", name, 1e3 * forward,
               1e3 * forward_analytic, percent_off(forward_analytic, forward), 1e3 * backward,
               1e3 * backward_analytic, percent_off(backward_analytic, backward));
  };
  double forward = 0, backward = 0, forward_analytic = 0, backward_analytic = 0;
  for (size_t i = 0; i < measured.layers.size() && i < analytic.size(); ++i) {
    const auto& m = measured.layers[i].by_microbatch.back();
    row(measured.layers[i].name, m.forward_s, m.backward_s, analytic[i].forward_s, analytic[i].backward_s);
    forward += m.forward_s;
    backward += m.backward_s;
    forward_analytic += analytic[i].forward_s;
    backward_analytic += analytic[i].backward_s;
  }
  row("all layers", forward, backward, forward_analytic, backward_analytic);
}

// The layers whose passes read values on the host, at each microbatch size measured: where a
// GPU's host waits, and what keeps a pass (and a one-process step) out of a CUDA graph.
void print_host_reads(const plan::ModelProfile& measured) {
  std::vector<std::string> rows, sizes;
  for (const auto& m : measured.layers.front().by_microbatch) sizes.push_back(std::to_string(m.microbatch));
  for (const auto& layer : measured.layers) {
    std::vector<std::string> forward, backward;
    bool any = false;
    for (const auto& m : layer.by_microbatch) {
      forward.push_back(std::to_string(m.host_reads_forward));
      backward.push_back(std::to_string(m.host_reads_backward));
      any = any || m.host_reads_forward > 0 || m.host_reads_backward > 0;
    }
    if (any) rows.push_back(fmt::format("| {} | {} | {} |", layer.name, fmt::join(forward, ", "),
                                        fmt::join(backward, ", ")));
  }
  if (rows.empty()) {
    fmt::print("\nhost reads: no layer's forward or backward reads a value on the host (nothing in "
               "them makes a GPU's host wait; CUDA graphs can capture every pass)\n");
    return;
  }
  fmt::print("\nhost reads: values each pass reads on the host (each makes a GPU's host wait; a pass "
             "that reads cannot be captured as a CUDA graph), at microbatch sizes {}:\n\n",
             fmt::join(sizes, ", "));
  fmt::print("| layer | forward | backward |\n|---|---|---|\n{}\n", fmt::join(rows, "\n"));
}

// "1,2,4": distinct positive sizes; empty: the model's default.
std::vector<int64_t> parse_microbatch_sizes(const std::string& list) {
  std::vector<int64_t> sizes;
  for (const auto& size : list.empty() ? std::vector<std::string>{} : split(list, ',')) {
    const auto value = parse_int(size);
    if (!value || *value < 1) fail("--microbatch-sizes: expected positive integers, got '{}'", size);
    if (std::count(sizes.begin(), sizes.end(), *value) > 0) fail("--microbatch-sizes: {} is given twice", *value);
    sizes.push_back(*value);
  }
  return sizes;
}

// Links between this machine's processes (Gloo over loopback) describe a cluster of such
// workers; a GPU pipeline's sends go over NCCL and NVLink, which processes sharing one GPU
// cannot measure: its plans take the cluster file's links.
void measure_links(plan::ModelProfile& measured, int repeats,
                   const std::function<void(const std::string&)>& report) {
  if (measured.device != "cpu") {
    report(fmt::format("links not measured on {}: plans take the cluster file's", measured.device));
    return;
  }
  measured.links = profile::measure_local_links(std::max(repeats, 25));
  for (const auto& [name, fit] : {std::pair{"p2p send/recv", measured.links.p2p},
                                  std::pair{"2-worker all-reduce", measured.links.all_reduce},
                                  std::pair{"send post (sender busy)", measured.links.send_post}}) {
    report(fmt::format("{}: latency {:.1f} us, {:.2f} GB/s (fit within {:.0f}%)", name,
                       1e6 * fit.latency_s, fit.bandwidth / 1e9, 100 * fit.max_error));
  }
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "profile", "Measure per-layer forward/backward/weight-gradient time of the configured model "
                 "([CONFIG.toml] [--section.field VALUE ...] --out profile.json "
                 "[--microbatch-sizes 1,2,4,8] [--repeats 5] [--threads 1] [--cluster NAME])");
  cmd->footer(
      "Config fields (the model to profile) as for train: CONFIG.toml and --section.field VALUE.\n"
      "  --out FILE               the profile JSON to write (required; plan --profile reads it)\n"
      "  --microbatch-sizes LIST  microbatch sizes to time each layer at (default 1,2,4,8; a model\n"
      "                           with BatchNorm: the run's microbatch, the one size it plans)\n"
      "  --repeats N              timings per measurement, the median kept (default 5)\n"
      "  --threads N              intra-op threads, as each worker will run (default 1)\n"
      "  --cluster NAME|FILE      the devices to set the analytic costs of (default on a CPU with\n"
      "                           one thread: this-machine)\n"
      "It ends with each layer's measured times beside the analytic ones `plan --config` takes on\n"
      "that cluster's devices (how far a plan without a profile holds for this model), and the\n"
      "layers whose passes read values on the host (what makes a GPU's host wait, and keeps a pass\n"
      "out of a CUDA graph).");
  cmd->prefix_command();
  cmd->callback([cmd] {
    const auto arguments = parse_config_arguments(
        cmd->remaining(), {"--out", "--microbatch-sizes", "--repeats", "--threads", "--cluster"}, {});
    const Config config = resolve_config(arguments);
    const auto option = [&](const char* name, const std::string& fallback) {
      const auto it = arguments.options.find(name);
      return it == arguments.options.end() ? fallback : it->second;
    };
    const std::string out = option("--out", "");
    if (out.empty()) fail("profile: --out FILE is required");
    require_writable_output(out, "--out");  // before minutes of measuring
    const std::string cluster_name = option("--cluster", "");
    std::optional<plan::ClusterSpec> cluster;
    if (!cluster_name.empty()) cluster = load_cluster_option(cluster_name);
    profile::ProfileOptions options;
    options.microbatch_sizes = parse_microbatch_sizes(option("--microbatch-sizes", ""));
    options.repeats = int(positive_option(arguments, "--repeats", 5, kMaxRepeats));
    options.threads = int(positive_option(arguments, "--threads", 1, most_compute_threads()));
    const auto report = [](const std::string& line) { fmt::print(stderr, "profile: {}\n", line); };
    auto measured = profile::profile_model_layers(config, options, report);
    measured.config_fields = arguments.overrides;  // the model measured, which its plans carry
    measure_links(measured, options.repeats, report);
    write_file_atomically(out, plan::to_json(measured).dump(2) + "\n");
    std::vector<int64_t> timed;
    for (const auto& m : measured.layers.front().by_microbatch) timed.push_back(m.microbatch);
    fmt::print("wrote {} ({} layers at microbatch sizes {})\n", out, measured.layers.size(), fmt::join(timed, ","));
    print_analytic_comparison(config, measured, cluster);
    print_host_reads(measured);
  });
}

}  // namespace pipetrain::cli
