#include <fmt/format.h>
#include <fmt/ranges.h>

#include <tuple>
#include <vector>

#include "cli/clusters.h"
#include "cli/commands.h"
#include "core/files.h"
#include "core/error.h"
#include "io/json_file.h"
#include "plan/slice_latency.h"
#include "plan/terapipe.h"
#include "sim/timeline.h"

namespace pipetrain::cli {
namespace {

// Planning from a measured slice profile (`pipetrain terapipe-profile`) instead of the
// analytic model: the slices to train with, and the predicted time of each way.
void plan_from_profile(const std::string& path, int stages, int64_t batch, int64_t microbatch,
                       int64_t granularity) {
  if (microbatch < 1 || batch < 1 || batch % microbatch != 0) {
    fail("--microbatch ({}) must divide --batch ({})", microbatch, batch);
  }
  const auto profile = plan::slice_profile_from_json(parse_json_file(path), path);
  const int64_t microbatches = batch / microbatch;
  const auto r = plan::plan_measured_slicing(profile, stages, microbatches, granularity);
  fmt::print("measured GPT (d_model {}, {} blocks, sequence {}) on {} stages ({} blocks on the "
             "slowest), {} microbatch(es) of {}; fit error mean {:.1f}%, max {:.1f}%\n",
             profile.d_model, profile.layers, profile.seq_len, stages, r.blocks_per_stage,
             microbatches, profile.batch, 100 * profile.fit.mean_error, 100 * profile.fit.max_error);
  fmt::print("DP slices ({}): {}\n", r.dp_slices.size(), fmt::join(r.dp_slices, " "));
  fmt::print("train with: --pipeline.schedule gpipe --pipeline.slices {}\n",
             fmt::join(r.dp_slices, ","));
  const double tokens = double(batch * profile.seq_len);
  fmt::print("| method | slices | predicted step time (s) | predicted tokens/s | speedup |\n"
             "|---|---|---|---|---|\n");
  for (const auto& [name, slices, seconds] :
       {std::tuple{"no slicing", std::vector<int64_t>{profile.seq_len}, r.unsliced_s},
        std::tuple{"best uniform", r.uniform_slices, r.uniform_s},
        std::tuple{"DP", r.dp_slices, r.dp_s}}) {
    fmt::print("| {} | {} | {:.3f} | {:.0f} | {:.2f}x |\n", name, slices.size(), seconds,
               tokens / seconds, r.unsliced_s / seconds);
  }
}

// "24 x 3" or "2 x 4 + 1 x 3": how many microbatches of each size (sizes come largest first).
std::string describe_sizes(const std::vector<int64_t>& sizes) {
  std::string out;
  for (size_t k = 0; k < sizes.size();) {
    size_t same = k;
    while (same < sizes.size() && sizes[same] == sizes[k]) ++same;
    out += fmt::format("{}{} x {}", out.empty() ? "" : " + ", same - k, sizes[k]);
    k = same;
  }
  return out;
}

// What the command line alone can get wrong (the planners check their sizes themselves): a
// --seq below 1, and with --profile the analytic model's options, which it would ignore.
void check_terapipe_arguments(const CLI::App& cmd, int64_t seq, bool profiled) {
  if (cmd.get_option("--seq")->count() > 0 && seq < 1) fail("--seq must be at least 1, got {}", seq);
  if (!profiled) return;
  for (const char* analytic : {"--model", "--cluster", "--tensor-parallel", "--seq", "--svg", "--trace"}) {
    if (cmd.get_option(analytic)->count() > 0) {
      fail("terapipe-plan: {} is for the analytic plan; --profile plans the profiled model as measured",
           analytic);
    }
  }
}

}  // namespace

void add_terapipe_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "terapipe-plan", "Token-slicing plan (TeraPipe DP) on an analytic latency model: slices, "
                       "predicted time vs. no slicing and vs. uniform slicing");
  static std::string model = "gpt3-175b", cluster = "p3-16xlarge-x48";
  static int stages = 48, tensor_parallel = 8;
  static int64_t batch = 2, microbatch = 1, seq = 0, granularity = 8;
  static std::string svg, trace, profile;
  cmd->add_option("--model", model, "gpt3-1b, gpt3-13b, gpt3-44b, gpt3-175b, gpt-3.9b, ...")->capture_default_str();
  cmd->add_option("--cluster", cluster, "a name in clusters/ or a cluster .toml path")->capture_default_str();
  cmd->add_option("--stages", stages, "pipeline stages K")->capture_default_str();
  cmd->add_option("--tensor-parallel", tensor_parallel, "devices per stage (Megatron)")->capture_default_str();
  cmd->add_option("--batch", batch, "sequences per step")->capture_default_str();
  cmd->add_option("--microbatch", microbatch, "sequences per microbatch in the sliced run")->capture_default_str();
  cmd->add_option("--seq", seq, "sequence length (default: the model's)");
  cmd->add_option("--granularity", granularity, "slice lengths are multiples of this")->capture_default_str();
  cmd->add_option("--profile", profile, "plan from a measured slice profile (`pipetrain "
                  "terapipe-profile --out FILE`) instead of the analytic model and cluster");
  cmd->add_option("--svg", svg, "simulate the DP-sliced GPipe schedule and draw its timeline here");
  cmd->add_option("--trace", trace, "the same simulation as Chrome-trace JSON");
  cmd->callback([cmd] {
    check_terapipe_arguments(*cmd, seq, !profile.empty());
    if (!profile.empty()) return plan_from_profile(profile, stages, batch, microbatch, granularity);
    require_writable_output(svg, "--svg");
    require_writable_output(trace, "--trace");
    plan::TeraPipeSetup setup;
    setup.model = plan::find_gpt_shape(model);
    if (seq > 0) setup.model.seq_len = seq;
    setup.cluster = load_cluster_option(cluster);
    setup.stages = stages;
    setup.tensor_parallel = tensor_parallel;
    setup.batch = batch;
    setup.microbatch = microbatch;
    setup.granularity = granularity;
    const plan::TeraPipeComparison r = plan::compare_terapipe(setup);
    fmt::print("{} on {} stages x {} devices, batch {}, sequence {}\n", setup.model.name, stages,
               tensor_parallel, batch, setup.model.seq_len);
    fmt::print("DP slices ({}): {}\n", r.dp.slices.size(), fmt::join(r.dp.slices, " "));
    fmt::print("| method | predicted step time (s) | speedup over microbatches only |\n|---|---|---|\n");
    fmt::print("| microbatches only (size 1) | {:.3f} | 1.00x |\n", r.microbatch_only_s);
    fmt::print("| uniform slicing, {} slices | {:.3f} | {:.2f}x |\n", r.best_uniform.slices.size(),
               r.uniform_s, r.microbatch_only_s / r.uniform_s);
    fmt::print("| DP slicing, {} slices | {:.3f} | {:.2f}x |\n", r.dp.slices.size(), r.dp_s,
               r.microbatch_only_s / r.dp_s);
    fmt::print("| DP slicing + batch DP, microbatches {} | {:.3f} | {:.2f}x |\n",
               describe_sizes(r.joint.microbatch_sizes), r.joint.total_s,
               r.microbatch_only_s / r.joint.total_s);
    for (size_t k = 0; k < r.joint.slices.size(); ++k) {
      if (k > 0 && r.joint.slices[k] == r.joint.slices[k - 1]) continue;
      fmt::print("  microbatch of {}: {} slices: {}\n", r.joint.microbatch_sizes[k],
                 r.joint.slices[k].size(), fmt::join(r.joint.slices[k], " "));
    }
    if (!r.joint.exhaustive) {
      fmt::print("  (batch DP over {} t_max candidates evenly spaced among the slice latencies)\n",
                 r.joint.candidates_tried);
    }
    if (svg.empty() && trace.empty()) return;
    const plan::SlicedSimulation simulated = plan::simulate_sliced(setup, r.dp);
    fmt::print("simulated GPipe schedule with these slices: {:.3f} s per step\n",
               simulated.result.iteration_ms / 1e3);
    auto timeline = sim::timeline_from_simulation(simulated.schedule, simulated.result);
    timeline.title = fmt::format("TeraPipe: {} on {} stages, {} slices per microbatch",
                                 setup.model.name, stages, r.dp.slices.size());
    if (!svg.empty()) write_file_atomically(svg, sim::render_svg(timeline));
    if (!trace.empty()) write_file_atomically(trace, sim::chrome_trace_json(timeline));
  });
}

}  // namespace pipetrain::cli
