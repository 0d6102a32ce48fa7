#include "train/run_control.h"

#include <signal.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/stop_signal.h"
#include "io/checkpoint_dir.h"

namespace pipetrain {

bool periodic_checkpoint_due(const Config& config, int64_t done) {
  const int64_t every = config.checkpoint.every;
  return every > 0 && done % every == 0 && done < config.train.steps;
}

void stop_after_checkpoint(int signal, int64_t done, const std::string& checkpoint,
                           const std::string& run_dir) {
  throw StopRequested{signal, fmt::format("stopped by {} after step {}; checkpoint {}; continue "
                                          "with: pipetrain train --resume {}",
                                          stop_signal_name(signal), done,
                                          checkpoint, run_dir)};
}

void fail_non_finite_loss(double loss, int64_t step, const std::string& stage,
                          const std::string& run_dir) {
  const std::string last_good = latest_checkpoint_or_empty(run_dir);
  fail("loss became {} at step {} (computed on {}); the run stops (try a lower train.lr); last "
       "good checkpoint: {}", loss, step, stage,
       last_good.empty() ? "none (the run wrote none yet)" : last_good);
}

void maybe_inject_fault(int rank, int64_t step, bool launched) {
  const char* fault = std::getenv("PIPETRAIN_FAULT");
  if (fault == nullptr || *fault == 0) return;
  int fault_rank = -1;
  long long fault_step = -1;
  char action[16] = "kill";
  if (std::sscanf(fault, "%d:%lld:%15s", &fault_rank, &fault_step, action) < 2) return;
  if (fault_rank != rank || fault_step != step) return;
  const std::string what(action);
  if (what == "term" || what == "hup") {  // hup: the terminal closed, to the whole job
    const int signal = what == "term" ? SIGTERM : SIGHUP;
    ::kill(launched ? ::getppid() : ::getpid(), signal);
    // This worker sees it at once (as if forwarded): the stop lands in this step, whatever
    // the launcher's polling delay.
    if (launched) std::raise(signal);
  } else if (what == "int") {
    std::raise(SIGINT);  // to this worker only, as `kill -INT <worker pid>` would
  } else if (what == "hang") {
    std::raise(SIGSTOP);
  } else {
    std::raise(SIGKILL);
  }
}

void keep_metrics_up_to(const std::string& path, int64_t step) {
  if (!std::filesystem::exists(path)) return;
  std::istringstream in(read_file(path));
  std::string kept, line;
  while (std::getline(in, line)) {
    const auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.value("step", int64_t(0)) <= step) kept += line + "\n";
  }
  write_file_atomically(path, kept);
}

std::string resuming_line(int64_t step, int64_t steps, const std::string& checkpoint_dir) {
  if (step < steps) return fmt::format("pipetrain: resuming at step {} from {}", step, checkpoint_dir);
  return fmt::format("pipetrain: the run stopped after its last step's checkpoint ({}), before its "
                     "summary: writing the final checkpoint, sample and summary", checkpoint_dir);
}

}  // namespace pipetrain
