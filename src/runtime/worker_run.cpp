// One pipeline worker's whole run: rendezvous, the training loop, metrics and progress (on the
// last stage, which alone knows the loss), validation, per-stage checkpoints, the sample.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/machine.h"
#include "core/progress.h"
#include "core/stop_signal.h"
#include "core/text.h"
#include "device/placement.h"
#include "device/torch_build.h"
#include "data/text_codec.h"
#include "io/content_fingerprint.h"
#include "io/metrics.h"
#include "io/plot.h"
#include "io/run_folder.h"
#include "model/registry.h"
#include "model/state_io.h"
#include "model/token_batch.h"
#include "runtime/comm.h"
#include "runtime/memory_accounting.h"
#include "runtime/pipeline.h"
#include "runtime/run_spec.h"
#include "runtime/shared_parameters.h"
#include "runtime/stage_checkpoint.h"
#include "runtime/stage_executor.h"
#include "runtime/stop_votes.h"
#include "schedule/catalogue.h"
#include "schedule/run_rules.h"
#include "train/optim.h"
#include "train/run_control.h"
#include "train/sample.h"
#include "train/training_loop.h"

namespace fs = std::filesystem;

namespace pipetrain::runtime {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr ? std::string(value) : fallback;
}

int env_int(const char* name, int fallback) {
  const std::string text = env_or(name, "");
  if (text.empty()) return fallback;
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    fail("environment variable {}: expected an integer, got '{}'", name, text);
  }
}

WorkerEnvironment environment_from_env(const Config& config, const RunSpec& spec,
                                       const std::optional<LaunchSettings>& launch) {
  WorkerEnvironment env;
  env.rank = env_int("RANK", 0);
  env.world_size = env_int("WORLD_SIZE", 1);
  env.local_rank = env_int("LOCAL_RANK", env.rank);
  env.master_addr = env_or("MASTER_ADDR", config.pipeline.master_addr);
  env.master_port = env_int("MASTER_PORT", 29500);
  env.store_hosted_elsewhere = launch.has_value();
  env.store_file = launch ? launch->store_file : "";
  const int expected = spec.layout.world();
  if (env.world_size != expected) {
    fail("WORLD_SIZE is {} but pipeline.stages x pipeline.dp_width is {}", env.world_size, expected);
  }
  if (env.rank < 0 || env.rank >= env.world_size) fail("RANK {} outside 0..{}", env.rank, env.world_size - 1);
  return env;
}

int64_t peak_resident_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return int64_t(usage.ru_maxrss) * 1024;  // KiB on Linux
}

// Per stage (rank order), the most distinct weight copies held, the peak resident memory and the
// most junction gradients held between zero-bubble B and W passes: one value per rank, summed
// into place (every rank calls this).
nlohmann::json weight_memory_report(Comm& comm, const StageExecutor& executor) {
  const int world = comm.world_size();
  auto values = torch::zeros({3, world}, torch::kFloat64);
  const auto copies = executor.peak_weight_copies();
  const double mb = double(1 << 20);
  values[0][comm.rank()] = *std::max_element(copies.begin(), copies.end());
  values[1][comm.rank()] = double(peak_resident_bytes()) / mb;
  values[2][comm.rank()] = double(executor.peak_weight_pass_bytes()) / mb;
  comm.all_reduce_sum(values, Comm::kWorld);
  nlohmann::json report = {{"weight_copies", nlohmann::json::array()},
                           {"peak_rss_mb", nlohmann::json::array()},
                           {"weight_pass_held_mb", nlohmann::json::array()}};
  for (int r = 0; r < world; ++r) {
    report["weight_copies"].push_back(int(values[0][r].item<double>()));
    report["peak_rss_mb"].push_back(values[1][r].item<double>());
    report["weight_pass_held_mb"].push_back(values[2][r].item<double>());
  }
  return report;
}

// Per rank, the cores it ran on ("0-3"): its CPU affinity, as the launcher's binding left it.
nlohmann::json cores_report(Comm& comm) {
  constexpr int64_t kMostCores = 1024;  // CPU_SETSIZE
  auto allowed = torch::zeros({comm.world_size(), kMostCores}, torch::kInt32);
  for (const int core : allowed_cores()) allowed[comm.rank()][core] = 1;
  comm.all_reduce_sum(allowed, Comm::kWorld);
  const auto by_rank = allowed.accessor<int32_t, 2>();
  nlohmann::json report = nlohmann::json::array();
  for (int r = 0; r < comm.world_size(); ++r) {
    std::vector<int> cores;
    for (int64_t core = 0; core < kMostCores; ++core) {
      if (by_rank[r][core] != 0) cores.push_back(int(core));
    }
    report.push_back(describe_cores(cores));
  }
  return report;
}

// For the start-up line: " on cores 0 | 1" (this node's workers), why they are not bound, or
// nothing (not asked; a worker torchrun started).
std::string describe_binding(const Config& config, const std::optional<LaunchSettings>& launch,
                             int world) {
  if (!launch || config.pipeline.bind_cores == 0) return "";
  if (!launch->worker_cores.empty()) return " on cores " + join(launch->worker_cores, " | ");
  return fmt::format(", not bound to cores (this machine's {} worker(s) would share its {} core(s))",
                     world / config.pipeline.nnodes, cpu_cores());
}

// "memory budget 2048 MiB per worker: allocator peaks 1790-2021 MiB, resident peaks ... (over on
// ranks 1, 2)": the run's largest per-step peaks against pipeline.memory_budget_mb.
std::string describe_budget(double budget_mb, const std::vector<MemoryReport>& by_rank) {
  double low = 1e300, high = 0, resident_low = 1e300, resident_high = 0;
  std::vector<std::string> over;
  for (size_t r = 0; r < by_rank.size(); ++r) {
    const double peak = to_mb(by_rank[r].peak), resident = to_mb(by_rank[r].resident_peak);
    low = std::min(low, peak), high = std::max(high, peak);
    resident_low = std::min(resident_low, resident), resident_high = std::max(resident_high, resident);
    if (std::max(peak, resident) > budget_mb) over.push_back(std::to_string(r));
  }
  return fmt::format("memory budget {:.0f} MiB per worker: tensor peaks {:.0f}-{:.0f} MiB, resident "
                     "peaks {:.0f}-{:.0f} MiB{}", budget_mb, low, high, resident_low, resident_high,
                     over.empty() ? ", within it" : ", over it on rank(s) " + join(over, ", "));
}

// The last stage rebuilds the whole model from every stage's file: one model.safetensors, the
// same as a single-process run's, and the text sample.
std::string assemble_model_and_sample(const Config& config, const fs::path& checkpoint_dir,
                                      int stages, CheckpointInfo info, const std::string& data_root) {
  for (int s = 0; s < stages; ++s) {
    const auto path = checkpoint_dir / fmt::format("stage{}.safetensors", s);
    if (!fs::exists(path)) {  // stages on other nodes, without a shared file system
      fmt::print(stderr, "pipetrain: {} is on another node: the stage checkpoints are not "
                         "assembled into model.safetensors and there is no sample\n", path.string());
      return "";
    }
  }
  const auto definition = make_model(config);
  auto model = definition->make_whole();
  std::vector<TensorEntry> all;
  for (int s = 0; s < stages; ++s) {
    const auto path = checkpoint_dir / fmt::format("stage{}.safetensors", s);
    for (auto& entry : decode_safetensors(read_file(path.string()), path.string())) {
      all.push_back(std::move(entry));
    }
  }
  load_module_entries(*model, all, checkpoint_dir.string());
  write_file_atomically((checkpoint_dir / "model.safetensors").string(),
                        encode_safetensors(module_entries(*model)));
  // optimizer.safetensors as a single-process run writes it: a later copy of a shared
  // parameter (the head's copy of GPT's embedding) has the first copy's state (identical
  // updates), so it is left out.
  const auto secondary = secondary_copies(*definition);
  const auto is_secondary = [&](const std::string& name) {
    return std::any_of(secondary.begin(), secondary.end(),
                       [&](const std::string& copy) { return name.rfind(copy + ".", 0) == 0; });
  };
  std::vector<TensorEntry> state;
  for (int s = 0; s < stages; ++s) {
    const auto path = checkpoint_dir / fmt::format("stage{}.optimizer.safetensors", s);
    for (auto& entry : decode_safetensors(read_file(path.string()), path.string())) {
      if (!is_secondary(entry.name)) state.push_back(std::move(entry));
    }
  }
  write_file_atomically((checkpoint_dir / "optimizer.safetensors").string(),
                        encode_safetensors(state));
  write_file_atomically((checkpoint_dir / "checkpoint.json").string(), checkpoint_info_json(info));
  if (config.sample.tokens <= 0) return "";
  return sample_of(*model, config, make_text_codec(config.data, data_root).get(),
                   *make_batch_source(config, data_root));
}

// Each worker writes its events; the last stage merges them into trace.json (Chrome trace,
// the simulator's format) and timeline.svg, then removes the parts.
void write_trace_part(const fs::path& dir, int rank, const std::vector<sim::TimedEvent>& events) {
  nlohmann::json part = nlohmann::json::array();
  for (const auto& e : events) {
    part.push_back({e.name, e.category, e.start_ms, e.duration_ms, e.microbatch, e.step,
                    e.memory_peak_bytes, e.memory_live_bytes});
  }
  write_file_atomically((dir / fmt::format("trace-rank{}.json", rank)).string(), part.dump());
}

// A few steady-state steps at a scale where each forward and backward is readable: twenty steps
// in one picture would give a microbatch's forward a pixel or two. Step 0 is skipped (first-touch
// allocations make it slow), unless the run is too short to have later steps.
std::string timeline_picture(const sim::Timeline& traced) {
  constexpr int kFirstStep = 2, kSteps = 3;
  int last_step = -1;
  for (const auto& lane : traced.events) {
    for (const auto& e : lane) last_step = std::max(last_step, e.step);
  }
  const int first = std::max(0, std::min(kFirstStep, last_step + 1 - kSteps));
  sim::Timeline window = sim::step_window(traced, first, kSteps);
  const int shown = std::min(kSteps, last_step + 1 - first);
  window.title = fmt::format("pipetrain: real run, step{} {} (of the {} traced in trace.json)",
                             shown > 1 ? "s" : "",
                             shown > 1 ? fmt::format("{}-{}", first + 1, first + shown)
                                       : std::to_string(first + 1),
                             last_step + 1);
  sim::SvgOptions options;
  options.width_px = sim::readable_width_px(window);
  return sim::render_svg(window, options);
}

// Where each worker peaked in the traced steps (its lane's highest action), after its memory line.
void add_traced_peaks(std::vector<std::string>& memory_lines, const sim::Timeline& traced) {
  for (size_t rank = 0; rank < std::min(memory_lines.size(), traced.events.size()); ++rank) {
    const auto& lane = traced.events[rank];
    const auto highest = std::max_element(lane.begin(), lane.end(), [](const auto& a, const auto& b) {
      return a.memory_peak_bytes < b.memory_peak_bytes;
    });
    if (highest == lane.end() || highest->memory_peak_bytes < 0) continue;
    memory_lines[rank] += fmt::format("; traced peak {:.1f} MiB in {} ({}, step {})", to_mb(highest->memory_peak_bytes),
                                      highest->name, highest->category, highest->step + 1);
  }
}

sim::Timeline write_trace(const fs::path& dir, const Layout& layout) {
  sim::Timeline timeline;
  timeline.title = fmt::format("pipetrain: real run, first {} steps", StageExecutor::traced_steps);
  double origin = std::numeric_limits<double>::infinity();
  for (int rank = 0; rank < layout.world(); ++rank) {
    const auto path = dir / fmt::format("trace-rank{}.json", rank);
    const Layout of = Layout::of_rank(layout, rank);
    timeline.lanes.push_back(layout.replicas == 1 ? fmt::format("worker {}", of.worker())
                                                  : fmt::format("replica {} worker {}",
                                                                of.replica(), of.worker()));
    timeline.events.emplace_back();
    if (!fs::exists(path)) continue;  // a worker on another node: its lane stays empty
    for (const auto& e : nlohmann::json::parse(read_file(path.string()))) {
      timeline.events.back().push_back({e[0], e[1], e[2], e[3], e[4], e[5], e[6], e[7]});
      origin = std::min(origin, e[2].get<double>());
    }
    fs::remove(path);
  }
  for (auto& lane : timeline.events) {
    for (auto& e : lane) e.start_ms -= origin;
  }
  write_file_atomically((dir / "trace.json").string(), sim::chrome_trace_json(timeline));
  write_file_atomically((dir / "timeline.svg").string(), timeline_picture(timeline));
  return timeline;
}

// What a pipeline worker's steps share with the loop: the executor, the collectives around a
// step (memory reports, stop votes, checkpoints) and what the run leaves at its end.
class PipelineWorkerSession : public TrainingSession {
 public:
  struct Run {
    const Config& config;
    const RunOptions& options;
    fs::path dir;
    Layout layout;
    const RunSpec& spec;
    std::string data;  // data_fingerprint when the run started (the reporter's, which commits)
  };
  PipelineWorkerSession(Run run, Comm& comm, StageExecutor& executor, CountingAllocator& allocator,
                        StopVotes& votes)
      : run_(std::move(run)), comm_(comm), executor_(executor),
        memory_(allocator, executor.device()), votes_(votes) {
    executor_.set_memory_watch(&memory_);
  }
  ~PipelineWorkerSession() override { executor_.set_memory_watch(nullptr); }  // (it outlives us)
  PipelineWorkerSession(const PipelineWorkerSession&) = delete;
  PipelineWorkerSession& operator=(const PipelineWorkerSession&) = delete;

  bool reports() const override { return run_.layout.reports(); }
  int rank() const override { return comm_.rank(); }
  StepResult train_step(int64_t step) override {
    memory_.begin_step();
    stepped_ = true;
    const StepResult result = executor_.train_step(step);
    step_memory_ = measure_memory(memory_, executor_.held_weights(),
                                  executor_.optimizer(), executor_.graph_pool_bytes());
    run_memory_ = run_memory_.max_with(step_memory_);
    return result;
  }
  // Every worker's memory to the reporter, on the steps it logs (a collective: all ranks). Only
  // the reporter waits for the table: a worker that waited too would meet the others at the step
  // boundary, realigning a no-flush pipeline (a first stage idled a forward's time there); it
  // finishes its part before posting the next.
  nlohmann::json step_fields(bool logged) override {
    if (!logged) return nlohmann::json::object();
    finish_posted_memory();
    posted_memory_ = post_memory_table(comm_, step_memory_);
    if (!reports()) return nlohmann::json::object();
    return memory_fields(finish_memory_table(comm_, posted_memory_));
  }
  void finish_posted_memory() {
    if (posted_memory_.handle >= 0) finish_memory_table(comm_, posted_memory_);
  }
  Validation evaluate(bool stoppable) override { return executor_.evaluate(stoppable); }
  StopVerdict stop_verdict(int64_t done, double loss, bool count_now) override {
    const StopVerdict verdict = votes_.cast(done, loss, reports() && !std::isfinite(loss));
    // Nothing is saved or finished on an uncounted vote (a checkpoint of broken weights).
    return count_now ? either(verdict, votes_.drain()) : verdict;
  }
  // Between two steps a no-flush pipeline still holds microbatches in flight: checkpoints hold
  // the weights they read (stashed versions, or what forwards ahead of their step read: see
  // WeightVersions). A rule that could not resume exactly would write only the final checkpoint.
  std::string mid_run_checkpoint_refusal() const override {
    return schedule::resume_refusal(run_.spec.schedule->rule);
  }
  void prepare_step(bool checkpoint_may_follow) override {
    executor_.set_checkpoint_may_follow(checkpoint_may_follow);
  }
  bool checkpointable() const override { return executor_.checkpointable(); }
  std::string save_checkpoint(int64_t done, double val_loss) override {
    return write_pipeline_checkpoint(run_.dir.string(), executor_, comm_, run_.layout, run_.config,
                                     run_.spec.ranges, run_.data, done, val_loss);
  }
  Finished finish(double val_loss) override;
  std::string loss_stage() const override {
    return fmt::format("stage {}, the last", run_.layout.stages() - 1);
  }

 private:
  Run run_;
  Comm& comm_;
  StageExecutor& executor_;
  MemoryWatch memory_;
  PostedMemoryTable posted_memory_;  // this worker's row of the last logged step's table
  StopVotes& votes_;
  MemoryReport step_memory_;
  MemoryReport run_memory_;  // field-wise maximum over the steps
  bool stepped_ = false;     // a run resumed at its last step only finishes
};

TrainingSession::Finished PipelineWorkerSession::finish(double val_loss) {
  finish_posted_memory();
  const Config& config = run_.config;
  const fs::path& dir = run_.dir;
  const fs::path checkpoint_dir = dir / "checkpoint";
  fs::create_directories(checkpoint_dir);
  CheckpointInfo final_info = pipeline_checkpoint_info(config, config.train.steps, run_.spec.ranges,
                                                       val_loss, executor_.loss_scale(), run_.data);
  final_info.crc32c = gather_checksums(
      comm_, final_info, write_stage_files(checkpoint_dir.string(), executor_, run_.layout, config.train.steps));
  write_pipeline_checkpoint(dir.string(), executor_, comm_, run_.layout, config, run_.spec.ranges,
                            run_.data, config.train.steps, val_loss);
  if (stepped_) write_trace_part(dir, comm_.rank(), executor_.events());  // else keep the run's
  const auto run_memory_by_rank = gather_memory(comm_, run_memory_);
  const nlohmann::json weight_memory = weight_memory_report(comm_, executor_);
  const nlohmann::json cores = cores_report(comm_);
  comm_.barrier();  // every stage's files are written
  Finished finished;
  if (!reports()) return finished;
  std::vector<std::string> memory_lines = {
      "memory: not measured: no step ran (the run resumed at its last step to finish it)"};
  if (stepped_) {
    memory_lines = describe_memory_by_rank(run_.layout, run_memory_by_rank);
    add_traced_peaks(memory_lines, write_trace(dir, run_.layout));
  }
  if (config.pipeline.memory_budget_mb > 0 && stepped_) {
    memory_lines.push_back(describe_budget(config.pipeline.memory_budget_mb, run_memory_by_rank));
  }
  for (const auto& line : memory_lines) finished.memory += line + "\n";
  // Under a memory budget a worker holds its stage, not necessarily the whole model, unless the
  // pipeline is one stage deep (replicas of the whole model).
  if (config.pipeline.memory_budget_mb > 0 && run_.layout.stages() > 1) {
    fmt::print("pipetrain: memory budget: the stage checkpoints are not assembled into "
               "model.safetensors and there is no sample\n");
  } else {
    finished.sample = assemble_model_and_sample(config, checkpoint_dir, run_.layout.stages(), final_info,
                                                run_.options.data_root);
  }
  finished.summary_fields = {{"stages", run_.layout.stages()},
                             {"dp_width", run_.layout.replicas},
                             {"memory", memory_lines},
                             {"schedule", config.pipeline.schedule},
                             {"weight_copies", weight_memory["weight_copies"]},
                             {"peak_rss_mb", weight_memory["peak_rss_mb"]},
                             {"weight_pass_held_mb", weight_memory["weight_pass_held_mb"]},
                             {"cores", cores}};
  return finished;
}

// The worker's sub-groups, joined in the same order everywhere (a group waits for all its
// members): its replicas, its pipeline, the validating workers' stop votes (BatchStopVotes),
// and one group per weight shared across workers (a tied embedding) that this worker holds.
CommGroups join_comm_groups(Comm& comm, const Layout& layout, const Config& config,
                            const std::vector<StageRange>& ranges) {
  CommGroups groups;
  if (layout.replicas > 1) {
    groups.replicas = comm.join_group(fmt::format("replicas-of-worker{}", layout.worker()),
                                      layout.replica_group());
    groups.pipeline = comm.join_group(fmt::format("pipeline{}", layout.replica()),
                                      layout.pipeline_group());
  }
  if (layout.replica() == 0) {
    groups.validation = comm.join_group("validation-stop-votes", layout.pipeline_group());
  }
  const auto holders = workers_holding_shared(*make_model(config), ranges, layout.workers, layout.placement);
  groups.shared.assign(holders.size(), -1);
  for (size_t g = 0; g < holders.size(); ++g) {
    const auto& workers = holders[g];
    if (workers.size() < 2 || std::count(workers.begin(), workers.end(), layout.worker()) == 0) continue;
    std::vector<int> ranks;
    for (const int worker : workers) ranks.push_back(layout.rank_of(layout.replica(), worker));
    groups.shared[g] = comm.join_group(fmt::format("shared{}-replica{}", g, layout.replica()), ranks);
  }
  return groups;
}

// The reporting worker's opening line: the pipeline, its workers and binding, device, build.
std::string pipeline_line(const Config& config, const RunSpec& spec, const Layout& layout,
                          int64_t threads, const std::string& binding, const fs::path& dir) {
  return fmt::format("pipetrain: pipeline of {} stage(s) ({}) on {} worker(s) x {} replica(s), "
                     "schedule {}, {} microbatches, {} thread(s) per worker{}; {}; {}; run folder {}",
                     layout.stages(), describe_partition(spec.ranges), layout.workers, layout.replicas,
                     config.pipeline.schedule, config.train.microbatches, threads, binding,
                     device::describe(spec.execution), describe(torch_build()), dir.string());
}

// The data's fingerprint (checkpoint.json records it; a resume compares it): our launcher read
// it once (and checked a resume against it); under torchrun the worker that writes
// checkpoint.json reads it, and each worker that checks a resume itself. "": not needed here.
std::string data_fingerprint_for(const Config& config, const RunOptions& options,
                                 const std::optional<LaunchSettings>& launch, bool reports) {
  if (launch) return launch->data_fingerprint;
  if (reports || options.resume) return data_fingerprint(config.data.path, options.data_root);
  return "";
}

// Under torchrun no launcher prepared the run folder: the reporting worker does as the launcher
// would (a folder holding a run is refused without --overwrite; a run training in it, always;
// config.toml written for --resume) and holds its lock to the end.
RunFolderLock claim_run_folder(const Config& config, const RunOptions& options, const fs::path& dir) {
  RunFolderLock lock = prepare_run_folder(dir.string(), options.resume, options.overwrite);
  write_file_atomically((dir / "config.toml").string(), to_toml(config));
  return lock;
}

// The step the run starts at: 0, or a resumed checkpoint's (restored into `executor`; the
// reporting worker cuts metrics.jsonl back to it and says so). `data`: the fingerprint a worker
// not started by our launcher checks the checkpoint against (the launcher checked it).
int64_t resume_point(const Config& config, const std::vector<StageRange>& ranges,
                     const RunOptions& options, const std::optional<LaunchSettings>& launch,
                     const fs::path& dir, StageExecutor& executor, const std::string& data,
                     bool reports) {
  const bool launched = launch.has_value();
  const std::string resume_from = launched        ? launch->resume_from
                                  : options.resume ? latest_checkpoint(dir.string())
                                                   : "";
  if (resume_from.empty()) return 0;
  const int64_t first_step =
      restore_pipeline_state(resume_from, executor, config, ranges, launched ? "" : data);
  if (reports) {
    keep_metrics_up_to((dir / "metrics.jsonl").string(), first_step);
    fmt::print(stderr, "{}\n", resuming_line(first_step, config.train.steps, resume_from));
  }
  return first_step;
}

}  // namespace

bool started_as_worker() { return std::getenv("RANK") != nullptr; }

std::optional<RunSummary> run_pipeline(const Config& config, const RunSpec& spec,
                                       const RunOptions& options,
                                       const std::vector<std::string>& train_args,
                                       const std::string& launch_file) {
  // Config and partition errors came from make_run_spec, before any process starts. Bad or too
  // short data, ids beyond the vocabulary, a wrong tokenizer: one line here too, not one per
  // worker. Workers our launcher spawned skip it: it checked (token files are read whole).
  if (launch_file.empty()) {
    make_batch_source(config, options.data_root);
    make_text_codec(config.data, options.data_root);
  }
  if (started_as_worker()) {
    return run_pipeline_worker(config, spec, options,
                               launch_file.empty() ? std::nullopt
                                                   : std::optional(read_launch_file(launch_file)));
  }
  return launch_pipeline_workers(config, spec, options, train_args);
}

std::optional<RunSummary> run_pipeline_worker(const Config& config, const RunSpec& spec,
                                              const RunOptions& options,
                                              const std::optional<LaunchSettings>& launch) {
  // From the start: a Ctrl-C to the process group, or a stop the launcher forwards, while the
  // workers still start (rendezvous, model, a resumed checkpoint) is a stop request like any
  // other (the run stops at a step boundary with its checkpoint), not a worker killed by it.
  install_stop_handlers();
  const WorkerEnvironment env = environment_from_env(config, spec, launch);
  maybe_inject_fault(env.rank, kStartupFault, launch.has_value());  // the fault tests' "start"
  const bool launched = launch.has_value();  // our launcher prepared the run folder
  const fs::path dir(launched ? launch->run_dir : options.run_dir);
  const bool progress_wanted = launched ? launch->progress : options.progress;
  const auto& ranges = spec.ranges;
  const Layout layout = Layout::of_rank(spec.layout, env.rank);
  const bool first = layout.holds_first_stage(), last = layout.holds_last_stage();
  const bool reports = layout.reports();  // metrics, checkpoint, summary: one worker writes them

  const bool bound = launched && !launch->worker_cores.empty();
  const int64_t threads = worker_compute_threads(config.train.threads, bound, env.world_size);
  configure_compute_threads(threads);
  // Only the first stage reads inputs and only the last reads labels (token files are
  // memory-mapped: the page cache is shared).
  std::shared_ptr<const BatchSource> batches;
  if (first || last) batches = make_batch_source(config, options.data_root);
  // Before any tensor exists, so weights, gradients and optimizer state are all counted.
  CountingAllocator& allocator = CountingAllocator::install();
  const auto timeout = std::chrono::milliseconds(int64_t(config.pipeline.timeout_s * 1000));
  const c10::Device device = device::worker_device(spec.execution, env.local_rank);
  Comm comm(env, timeout, {spec.execution.transport, device});
  // After the rendezvous, so a refusal ends the peers at once (they lose this worker) instead of
  // leaving them waiting for it for pipeline.timeout_s.
  std::optional<RunFolderLock> folder_lock;
  if (reports && !launched) folder_lock.emplace(claim_run_folder(config, options, dir));
  StopVotes stop_votes(comm);
  const CommGroups groups = join_comm_groups(comm, layout, config, ranges);
  StageExecutor executor(config, spec, batches.get(), comm, device, layout, groups, *spec.lists);
  if (reports) {
    fmt::print(stderr, "{}\n", pipeline_line(config, spec, layout, threads,
                                             describe_binding(config, launch, env.world_size), dir));
  }
  const std::string data = data_fingerprint_for(config, options, launch, reports);
  const int64_t first_step = resume_point(config, ranges, options, launch, dir, executor, data, reports);
  // Once the run is sure to start (a refused resume stays one error line).
  for (const std::string& advice :
       {schedule::training_advice(config), device::sharing_advice(spec.execution)}) {
    if (reports && !advice.empty()) fmt::print(stderr, "{}\n", advice);
  }
  PipelineWorkerSession session({config, options, dir, layout, spec, data}, comm, executor, allocator, stop_votes);
  LoopSettings settings = loop_settings(config, batches.get(), dir.string(), first_step, progress_wanted);
  settings.launched = launched;
  settings.plot_title = "pipetrain: loss (pipeline)";
  auto summary = run_training_loop(config, session, settings);
  if (launched) return std::nullopt;  // the launcher reports
  return summary;
}

}  // namespace pipetrain::runtime
