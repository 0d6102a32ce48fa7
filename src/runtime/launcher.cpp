// The launcher: spawns one worker process per stage, watches them, stops all on a failure.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/machine.h"
#include "core/stop_signal.h"
#include "io/checkpoint_dir.h"
#include "io/content_fingerprint.h"
#include "io/run_folder.h"
#include "runtime/comm.h"
#include "runtime/launch_file.h"
#include "runtime/pipeline.h"
#include "runtime/stage_checkpoint.h"
#include "schedule/run_rules.h"

extern char** environ;

namespace fs = std::filesystem;

namespace pipetrain::runtime {
namespace {

using Clock = std::chrono::steady_clock;

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool done = false;
  int status = 0;
  Clock::time_point ended;
  int signal_sent = 0;  // the last signal the launcher sent it
  std::string error;    // its error line (from its error file), if it wrote one
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  }
  return fmt::format("exited with status {}", WEXITSTATUS(status));
}

// A worker that stopped on SIGINT/SIGTERM after checkpointing exits with 128 + signal.
bool stopped_on_request(const Worker& w) {
  return w.done && WIFEXITED(w.status) &&
         (WEXITSTATUS(w.status) == 128 + SIGINT || WEXITSTATUS(w.status) == 128 + SIGTERM);
}

bool failed(const Worker& w) {
  return w.done && !(WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0) && !stopped_on_request(w);
}

// The environment of one worker: ours with the torchrun variables and the error file set (the
// rest of what it needs is in its launch file).
std::vector<std::string> worker_environment(int rank, int local_rank, int world,
                                            const std::string& addr, int port,
                                            const std::string& error_file) {
  std::vector<std::string> env;
  const std::vector<std::string> set_here = {"RANK=", "WORLD_SIZE=", "LOCAL_RANK=", "MASTER_ADDR=",
                                             "MASTER_PORT=", std::string(kWorkerErrorFileVariable) + "="};
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry(*e);
    bool replaced = false;
    for (const auto& name : set_here) replaced |= entry.rfind(name, 0) == 0;
    if (!replaced) env.push_back(entry);
  }
  env.push_back(fmt::format("RANK={}", rank));
  env.push_back(fmt::format("LOCAL_RANK={}", local_rank));
  env.push_back(fmt::format("WORLD_SIZE={}", world));
  env.push_back("MASTER_ADDR=" + addr);
  env.push_back(fmt::format("MASTER_PORT={}", port));
  env.push_back(std::string(kWorkerErrorFileVariable) + "=" + error_file);
  return env;
}

// A private folder for the rendezvous file and the workers' error files, removed with
// everything in it when the run ends.
class ScratchFolder {
 public:
  ScratchFolder() {
    std::string pattern = (fs::temp_directory_path() / "pipetrain-rendezvous-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      fail("cannot create a rendezvous folder in {}: {}", fs::temp_directory_path().string(),
           std::strerror(errno));
    }
    dir_ = pattern;
  }
  ~ScratchFolder() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::string store() const { return path("store"); }
  std::string error_file(int rank) const { return path(fmt::format("rank{}.error", rank)); }

 private:
  std::string dir_;
};

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// `cores`: the worker's own cores (empty: wherever the OS places it); bound before exec, so
// every thread it starts inherits them.
pid_t spawn(std::vector<std::string> argv, std::vector<std::string> env, const std::vector<int>& cores) {
  auto c_argv = c_strings(argv);
  auto c_env = c_strings(env);  // built before fork: the child only calls exec
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) fail("cannot start a worker process: {}", std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // no orphans if the launcher dies
    if (getppid() != parent) _exit(127);
    if (!cores.empty()) bind_to_cores(cores);  // if refused, it runs unbound (summary.json: "cores")
    // Stop signals wait (the mask survives exec) until the worker's handlers take them
    // (install_stop_handlers unblocks): one sent while it loads would otherwise kill it.
    sigset_t stops;
    sigemptyset(&stops);
    for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, signal);
    sigprocmask(SIG_BLOCK, &stops, nullptr);
    execve("/proc/self/exe", c_argv.data(), c_env.data());
    _exit(127);
  }
  return pid;
}

void reap(std::vector<Worker>& workers) {
  for (auto& w : workers) {
    if (w.done) continue;
    if (waitpid(w.pid, &w.status, WNOHANG) == w.pid) w.done = true, w.ended = Clock::now();
  }
}

bool all_done(const std::vector<Worker>& workers) {
  for (const auto& w : workers) if (!w.done) return false;
  return true;
}

// Waits up to `limit` for every worker to end; true if all did.
bool wait_all(std::vector<Worker>& workers, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (true) {
    reap(workers);
    if (all_done(workers)) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void signal_all(std::vector<Worker>& workers, int sig) {
  for (auto& w : workers) {
    if (!w.done) kill(w.pid, sig), w.signal_sent = sig;
  }
}

bool killed_by_foreign_signal(const Worker& w) {
  return WIFSIGNALED(w.status) && WTERMSIG(w.status) != w.signal_sent;
}
// It ignored SIGTERM too: a worker that stopped responding (SIGSTOP, a dead-locked thread).
bool killed_unresponsive(const Worker& w) {
  return WIFSIGNALED(w.status) && WTERMSIG(w.status) == SIGKILL && w.signal_sent == SIGKILL;
}
// Comm's message for a peer that went away: a consequence, rarely the cause.
bool reports_lost_peer(const Worker& w) {
  return w.error.find(kLostPeerMessage) != std::string::npos;
}

// The root cause, in order: a worker killed by a signal the launcher did not send (kill -9, the
// OOM killer); the first worker's own error; a worker that did not respond (its peers' timeouts
// are the consequence, and the launcher's SIGKILL is not the cause); a lost peer (on another
// node); any failure.
const Worker& root_cause(const std::vector<Worker>& workers) {
  const std::vector<std::function<bool(const Worker&)>> rules = {
      killed_by_foreign_signal,
      [](const Worker& w) { return !w.error.empty() && !reports_lost_peer(w); },
      killed_unresponsive,
      [](const Worker& w) { return !w.error.empty(); },
      [](const Worker&) { return true; }};
  for (const auto& rule : rules) {
    const Worker* first = nullptr;
    for (const auto& w : workers) {
      if (failed(w) && rule(w) && (first == nullptr || w.ended < first->ended)) first = &w;
    }
    if (first != nullptr) return *first;
  }
  throw std::logic_error("root_cause: no worker failed");
}

std::string read_error_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// One line for the whole run: which worker failed and why. An internal error stays one.
[[noreturn]] void report_failure(std::vector<Worker>& workers, const PipelineConfig& p,
                                 const ScratchFolder& scratch) {
  for (auto& w : workers) w.error = read_error_line(scratch.error_file(w.rank));
  const Worker& cause = root_cause(workers);
  const std::string who = fmt::format("pipeline worker rank {} (replica {}, worker {})", cause.rank,
                                      cause.rank / p.stages, cause.rank % p.stages);
  const std::string all = fmt::format("all {} workers{} stopped", workers.size(),
                                      p.nnodes > 1 ? fmt::format(" of node {}", p.node_rank) : "");
  if (killed_unresponsive(cause)) {
    fail("{} did not respond within pipeline.timeout_s ({:g} s): its peers gave up waiting for it "
         "and it ignored SIGTERM, so the launcher killed it; {}", who, p.timeout_s, all);
  }
  if (cause.error.empty()) fail("{} {}; {}", who, describe_status(cause.status), all);
  const std::string internal = "pipetrain: internal error: ", error = "pipetrain: error: ";
  if (cause.error.rfind(internal, 0) == 0) {
    throw std::runtime_error(fmt::format("{}: {}; {}", who, cause.error.substr(internal.size()), all));
  }
  const bool prefixed = cause.error.rfind(error, 0) == 0;
  fail("{}: {}; {}", who, prefixed ? cause.error.substr(error.size()) : cause.error, all);
}

}  // namespace

// This node's share of the ranks: nnodes equal blocks of consecutive ranks.
struct NodeShare {
  int first_rank, ranks;
};

// (make_run_spec checked that nnodes divides the workers.)
NodeShare node_share(const PipelineConfig& p, int world) {
  const int ranks = world / int(p.nnodes);
  return {int(p.node_rank) * ranks, ranks};
}

namespace {

// Waits for the workers: a stop signal is forwarded once (they finish the step, checkpoint and
// exit); when one fails the others get a moment to report, then SIGTERM, then SIGKILL.
void supervise(std::vector<Worker>& workers) {
  bool forwarded = false;
  while (true) {
    reap(workers);
    if (all_done(workers)) return;
    if (stop_signal() != 0 && !forwarded) {
      signal_all(workers, stop_signal());
      forwarded = true;
    }
    bool any_failed = false;
    for (const auto& w : workers) any_failed |= failed(w);
    if (any_failed) {
      // Peers of a dead worker usually notice at once (closed socket).
      if (!wait_all(workers, std::chrono::seconds(2))) {
        signal_all(workers, SIGTERM);
        if (!wait_all(workers, std::chrono::seconds(3))) {
          signal_all(workers, SIGKILL);
          wait_all(workers, std::chrono::seconds(10));
        }
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

// Workers stopped on request: the run ends with how to continue it (or why it cannot).
void throw_if_stopped(const std::vector<Worker>& workers, const RunSpec& spec,
                      const std::string& run_dir) {
  const int world = spec.layout.world();
  for (const auto& w : workers) {
    if (!stopped_on_request(w)) continue;
    const std::string refusal = schedule::resume_refusal(spec.schedule->rule);
    if (!refusal.empty()) {
      throw StopRequested{WEXITSTATUS(w.status) - 128,
                          fmt::format("all {} workers stopped on request; no checkpoint: {}",
                                      world, refusal)};
    }
    throw StopRequested{WEXITSTATUS(w.status) - 128,
                        fmt::format("all {} workers stopped on request; checkpoint {}; continue "
                                    "with: pipetrain train --resume {}", world,
                                    latest_checkpoint_or_empty(run_dir), run_dir)};
  }
}

// What the reporting worker (the last stage of replica 0, maybe on another node) wrote.
RunSummary read_summary(const Config& config, const std::string& run_dir) {
  std::ifstream in(fs::path(run_dir) / "summary.json");
  const auto json = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  RunSummary summary;
  summary.steps = config.train.steps;
  summary.reported_here = json.is_object();
  if (json.is_object()) {
    summary.final_loss = json.value("final_loss", 0.0);
    summary.final_val_loss = json.value("final_val_loss", 0.0);
    for (const auto& [key, value] : json.items()) {
      const std::string prefix = "final_val_";
      if (key.rfind(prefix, 0) == 0 && key != "final_val_loss" && value.is_number()) {
        summary.final_val_measures.emplace_back(key.substr(prefix.size()), value.get<double>());
      }
    }
    summary.tokens_per_s = json.value("tokens_per_s", 0.0);
    summary.throughput_unit = json.value("throughput_unit", std::string("tokens"));
    summary.seconds = json.value("seconds", 0.0);
    for (const auto& line : json.value("memory", nlohmann::json::array())) {
      summary.memory += line.get<std::string>() + "\n";
    }
  }
  std::ifstream sample_in(fs::path(run_dir) / "sample.txt");
  summary.sample.assign((std::istreambuf_iterator<char>(sample_in)),
                        std::istreambuf_iterator<char>());
  while (!summary.sample.empty() && summary.sample.back() == '\n') summary.sample.pop_back();
  return summary;
}

// The run folder node 0 owns (locked until the workers end) or this node's copy of it.
std::optional<RunFolderLock> open_run_folder(const Config& config, const RunOptions& options) {
  if (config.pipeline.node_rank != 0) {
    fs::create_directories(options.run_dir);  // node 0's on a shared file system, or our own
    return std::nullopt;
  }
  std::optional<RunFolderLock> lock(
      prepare_run_folder(options.run_dir, options.resume, options.overwrite));
  write_file_atomically((fs::path(options.run_dir) / "config.toml").string(), to_toml(config));
  return lock;
}

// Where every worker starts: the checkpoint to resume (the same for all, whatever `latest` says
// later; several nodes resume from a run folder they share) and the data's fingerprint. A resume
// is checked against this run before anything is written.
struct StartingPoint {
  std::string resume_from, data;
};

StartingPoint starting_point(const Config& config, const RunSpec& spec, const RunOptions& options) {
  if (options.resume && config.pipeline.node_rank == 0) refuse_run_folder_in_use(options.run_dir);
  if (options.resume) refuse_inexact_policy(config);  // the reason, before any missing checkpoint
  StartingPoint start;
  start.resume_from = options.resume ? latest_checkpoint(options.run_dir) : "";
  start.data = data_fingerprint(config.data.path, options.data_root);
  if (options.resume) check_resumable(start.resume_from, config, spec.ranges, start.data);
  return start;
}

// This node's workers, each with its block of cores when there are blocks; their pids in the
// run folder's workers.pid.
std::vector<Worker> spawn_workers(const std::vector<std::string>& argv, const PipelineConfig& p,
                                  const NodeShare& share, int world, int port,
                                  const ScratchFolder& scratch,
                                  const std::vector<std::vector<int>>& blocks,
                                  const std::string& run_dir) {
  std::vector<Worker> workers;
  std::ofstream pids(fs::path(run_dir) / "workers.pid");
  for (int local = 0; local < share.ranks; ++local) {
    Worker w;
    w.rank = share.first_rank + local;
    w.pid = spawn(argv, worker_environment(w.rank, local, world, p.master_addr, port,
                                           scratch.error_file(w.rank)),
                  blocks.empty() ? std::vector<int>{} : blocks[size_t(local)]);
    pids << w.pid << "\n";
    workers.push_back(w);
  }
  return workers;
}

}  // namespace

RunSummary launch_pipeline_workers(const Config& config, const RunSpec& spec,
                                   const RunOptions& options,
                                   const std::vector<std::string>& train_args) {
  const auto& p = config.pipeline;
  const int world = spec.layout.world();
  const NodeShare share = node_share(p, world);
  // From the start: a stop before the workers run ends the launch cleanly (no half-written
  // launch file), one after is forwarded to them (supervise).
  install_stop_handlers();
  const StartingPoint start = starting_point(config, spec, options);
  const std::optional<RunFolderLock> folder_lock = open_run_folder(config, options);
  const auto timeout = std::chrono::milliseconds(int64_t(p.timeout_s * 1000));
  // One machine on loopback: rendezvous through a file, so nothing listens beyond loopback (Gloo
  // binds 127.0.0.1). Otherwise node 0 hosts a TCPStore and the others' workers connect to it.
  const bool file_rendezvous = p.nnodes == 1 && p.master_port == 0 && is_loopback_address(p.master_addr);
  const ScratchFolder scratch;
  std::optional<StoreHost> store;
  if (!file_rendezvous && p.node_rank == 0) {
    store.emplace(p.master_addr, int(p.master_port), timeout);
  }
  const int port = store ? store->port() : int(p.master_port);

  // One block of cores per worker when each can have its own (pipeline.bind_cores): a worker's
  // Gloo threads then receive its messages on its own cores instead of interrupting another
  // worker's compute; 2BW on 2 cores ran 2-3% faster (docs/benchmarks.md).
  const auto blocks = p.bind_cores == 1 ? core_blocks(allowed_cores(), share.ranks)
                                        : std::vector<std::vector<int>>{};
  LaunchSettings launch;
  for (const auto& block : blocks) launch.worker_cores.push_back(describe_cores(block));
  launch.run_dir = options.run_dir;
  launch.store_file = file_rendezvous ? scratch.store() : "";
  launch.progress = options.progress;
  launch.resume_from = start.resume_from;
  launch.data_fingerprint = start.data;
  const std::string launch_file = launch_file_path(options.run_dir, p.node_rank);
  write_launch_file(launch_file, launch);
  if (const int signal = stop_signal(); signal != 0) {
    throw StopRequested{signal, fmt::format("stopped by {} before the workers started; nothing was "
                                            "trained", stop_signal_name(signal))};
  }
  std::vector<std::string> argv = {"pipetrain", "train"};
  argv.insert(argv.end(), train_args.begin(), train_args.end());
  argv.insert(argv.end(), {std::string(kLaunchFileOption), launch_file});
  std::vector<Worker> workers =
      spawn_workers(argv, p, share, world, port, scratch, blocks, options.run_dir);
  supervise(workers);
  for (const auto& w : workers) {
    if (failed(w)) report_failure(workers, p, scratch);
  }
  throw_if_stopped(workers, spec, options.run_dir);
  return read_summary(config, options.run_dir);
}

}  // namespace pipetrain::runtime
