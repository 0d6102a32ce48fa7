// `pipetrain simulate`: build (or load) a schedule, validate it, simulate it under a cost model,
// print the grid and the summary, optionally write the SVG timeline, Chrome trace and CSV; or
// list the schedule catalogue.
#include <memory>

#include <fmt/format.h>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/text.h"
#include "schedule/catalogue.h"
#include "schedule/generators.h"
#include "schedule/staleness.h"
#include "schedule/text_format.h"
#include "schedule/validate.h"
#include "sim/simulator.h"
#include "sim/timeline.h"

namespace pipetrain::cli {
namespace {

struct SimulateOptions {
  schedule::ScheduleSpec spec;
  int iterations = 0;  // 0: 1 for flush schedules, 4 for no-flush ones (steady state)
  sim::StageCost cost;
  double latency_ms = 0, bandwidth = 0, samples_per_microbatch = 1;
  std::string svg, trace, csv_out, csv_in;
  bool show_transfers = false, show_versions = false;
  bool list = false, catalogue = false;
};

// The flags docs/schedules.md simulates a schedule with (beyond p and m): two chunks where it
// takes chunks, and the iterations that show a no-flush schedule's steady state.
std::string example_flags(const schedule::ScheduleEntry& entry) {
  std::vector<std::string> flags;
  if (entry.parameters.chunks) flags.push_back("--chunks 2");
  if (entry.simulated_iterations() > 1) {
    flags.push_back(fmt::format("--iterations {}", entry.simulated_iterations()));
  }
  return join(flags, " ");
}

// One line per schedule for scripts (scripts/gen_schedule_docs.sh): name|example flags|summary.
std::string catalogue_lines() {
  std::string out;
  for (const auto& e : schedule::schedule_catalogue()) {
    out += fmt::format("{}|{}|{}\n", e.name, example_flags(e), e.summary);
  }
  return out;
}

std::string names_taking(bool schedule::Parameters::*parameter) {
  return join(schedule::schedule_names_where(
                  [&](const schedule::ScheduleEntry& e) { return e.parameters.*parameter; }),
              ", ");
}

schedule::Schedule build(SimulateOptions& o) {
  if (!o.csv_in.empty()) {
    schedule::Schedule s = schedule::parse_csv(read_file(o.csv_in));
    schedule::Validation check = schedule::validate(s);
    if (!check.ok) {
      // The grid goes to stderr; the error itself stays one line.
      fmt::print(stderr, "{}\n", check.error);
      fail("{}", check.error.substr(0, check.error.find('\n')));
    }
    if (s.policy.kind == schedule::WeightPolicyKind::Predicted) schedule::derive_staleness(s);
    return s;
  }
  o.spec.iterations = o.iterations > 0 ? o.iterations
                                       : schedule::schedule_entry(o.spec.name).simulated_iterations();
  o.spec.nominal_forward = o.cost.forward_ms;
  o.spec.nominal_backward = o.cost.backward_ms;
  o.spec.nominal_weight = o.cost.weight_ms;
  return schedule::make_schedule(o.spec);
}

std::string summary(const schedule::Schedule& s, const sim::SimResult& r, bool steady) {
  std::string out = fmt::format(
      "schedule {}: {} workers x {} chunk(s), {} microbatches x {} slice(s), {} iteration(s), "
      "dp width {}, weights: {}\n",
      s.name, s.workers, s.chunks, s.microbatches, s.slices, s.iterations, s.dp_width,
      schedule::policy_name(s.policy.kind));
  out += fmt::format("iteration time   {:.3f} ms{}\n", r.iteration_ms,
                     steady ? fmt::format(" (steady state, iterations 1..{})", s.iterations - 2)
                            : "");
  out += fmt::format("makespan         {:.3f} ms\n", r.makespan_ms);
  out += fmt::format("throughput       {:.2f} microbatches/s per pipeline, {:.2f} samples/s\n",
                     r.microbatches_per_s, r.samples_per_s);
  out += "worker  bubble   peak-activations  peak-memory  weight-versions";
  const bool predicted = s.policy.kind == schedule::WeightPolicyKind::Predicted;
  out += predicted ? "  staleness(fwd/bwd)\n" : "\n";
  for (int w = 0; w < s.workers; ++w) {
    out += fmt::format("{:<7} {:>6.2f}%  {:>16}  {:>11.3g}  {:>15}", w,
                       100.0 * r.bubble_fraction[w], r.stats.peak_inflight[w],
                       r.peak_memory_bytes[w], r.stats.peak_live_versions[w]);
    if (predicted && w < static_cast<int>(s.policy.forward_staleness.size()))
      out += fmt::format("  {}/{}", s.policy.forward_staleness[w],
                         s.policy.backward_staleness[w]);
    out += "\n";
  }
  return out;
}

void run(SimulateOptions& o) {
  if (o.list) return void(fmt::print("{}", catalogue_lines()));
  if (o.catalogue) return void(fmt::print("{}", schedule::catalogue_markdown()));
  for (const auto& [path, option] : {std::pair{o.svg, "--svg"}, std::pair{o.trace, "--trace"}, std::pair{o.csv_out, "--csv"}}) {
    require_writable_output(path, option);
  }
  schedule::Schedule s = build(o);
  sim::CostModel costs = sim::uniform_cost_model(o.cost, s.chunks);
  costs.p2p_latency_ms = o.latency_ms;
  costs.bandwidth_bytes_per_ms = o.bandwidth;
  costs.samples_per_microbatch = o.samples_per_microbatch;
  if (!(o.samples_per_microbatch > 0)) fail("--samples-per-microbatch must be > 0");
  sim::SimResult r = sim::simulate(s, costs);

  schedule::GridOptions grid;
  grid.show_transfers = o.show_transfers;
  grid.show_versions = o.show_versions;
  fmt::print("{}\n{}", schedule::format_grid(s, grid), summary(s, r, s.iterations >= 4));

  sim::Timeline timeline = sim::timeline_from_simulation(s, r);
  timeline.title = fmt::format("{}: p={} v={} m={} iterations={}  iteration {:.2f} ms", s.name,
                               s.workers, s.chunks, s.microbatches, s.iterations, r.iteration_ms);
  if (!o.svg.empty()) write_file_atomically(o.svg, sim::render_svg(timeline));
  if (!o.trace.empty()) write_file_atomically(o.trace, sim::chrome_trace_json(timeline));
  if (!o.csv_out.empty()) write_file_atomically(o.csv_out, schedule::to_csv(s));
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  auto* cmd = app.add_subcommand("simulate", "Generate, validate and simulate a pipeline schedule");
  cmd->add_option("--schedule", o->spec.name, "Schedule: " + join(schedule::schedule_names(), ", "))
      ->capture_default_str();
  cmd->add_option("--stages,-p", o->spec.stages, "Pipeline workers p")->capture_default_str();
  cmd->add_option("--microbatches,-m", o->spec.microbatches, "Microbatches per iteration")
      ->capture_default_str();
  cmd->add_option("--chunks,-v", o->spec.chunks,
                  "Model chunks per worker (" + names_taking(&schedule::Parameters::chunks) +
                      "; default: 2 for them, else 1)");
  cmd->add_option("--slices", o->spec.slices,
                  "Token slices per microbatch (" + names_taking(&schedule::Parameters::slices) + ")")
      ->capture_default_str();
  cmd->add_option("--iterations", o->iterations,
                  "Iterations (default: 1; 4 where a schedule does not flush or overlaps the next "
                  "iteration, to see the steady state)")
      ->check(at_least_one());
  cmd->add_option("--dp-width,-w", o->spec.dp_width, "Data-parallel replicas of each worker")
      ->capture_default_str();
  cmd->add_option("--forward-ms", o->cost.forward_ms, "Forward time of one worker's share")
      ->capture_default_str();
  cmd->add_option("--backward-ms", o->cost.backward_ms, "Full backward time (input + weight)")
      ->capture_default_str();
  cmd->add_option("--weight-ms", o->cost.weight_ms, "Weight-gradient part of the backward")
      ->capture_default_str();
  cmd->add_option("--optimizer-ms", o->cost.optimizer_ms, "Optimizer step time")
      ->capture_default_str();
  cmd->add_option("--allreduce-ms", o->cost.allreduce_ms, "Gradient all-reduce time (w > 1)")
      ->capture_default_str();
  cmd->add_option("--activation-bytes", o->cost.activation_bytes, "Activations per microbatch")
      ->capture_default_str();
  cmd->add_option("--weight-bytes", o->cost.weight_bytes, "Bytes of one weight version")
      ->capture_default_str();
  cmd->add_option("--transfer-bytes", o->cost.transfer_bytes, "Bytes sent between stages")
      ->capture_default_str();
  cmd->add_option("--latency-ms", o->latency_ms, "Point-to-point latency")->capture_default_str();
  cmd->add_option("--bandwidth", o->bandwidth, "Link bandwidth in bytes/ms (0: infinite)")
      ->capture_default_str();
  cmd->add_option("--samples-per-microbatch", o->samples_per_microbatch, "For samples/s")
      ->capture_default_str();
  cmd->add_option("--svg", o->svg, "Write the SVG timeline here");
  cmd->add_option("--trace", o->trace, "Write the Chrome-trace JSON here (Perfetto)");
  cmd->add_option("--csv", o->csv_out, "Write the schedule as CSV here");
  cmd->add_option("--load", o->csv_in, "Simulate this CSV schedule instead of generating one");
  cmd->add_flag("--show-transfers", o->show_transfers, "Grid: also show send/recv/updates");
  cmd->add_flag("--show-versions", o->show_versions, "Grid: show the weight version read");
  cmd->add_flag("--catalogue", o->catalogue, "Print the schedule catalogue (Markdown) instead");
  cmd->add_flag("--list", o->list,
                "Print one line per schedule instead: name|example flags|summary");
  cmd->callback([o, cmd] {
    // A loaded schedule is simulated as it is: its own shape, not these.
    for (const char* shape : {"--schedule", "--stages", "--microbatches", "--chunks", "--slices", "--iterations", "--dp-width"}) {
      if (!o->csv_in.empty() && cmd->get_option(shape)->count() > 0) {
        fail("simulate: {} shapes a generated schedule; --load simulates {} as it is", shape, o->csv_in);
      }
    }
    // A schedule that takes chunks is simulated at 2 unless told (at 1 interleaved is 1F1B).
    const schedule::ScheduleEntry* entry = schedule::find_schedule(o->spec.name);
    if (o->csv_in.empty() && cmd->get_option("--chunks")->count() == 0 && entry != nullptr &&
        entry->parameters.chunks) {
      o->spec.chunks = 2;
    }
    run(*o);
  });
}

}  // namespace pipetrain::cli
