#pragma once
// SIGINT/SIGTERM as a request, not a kill: the training loop finishes its current step, writes
// a checkpoint and exits (exit code 128 + signal), so `--resume` continues from there. SIGHUP
// (the terminal closed) counts as SIGTERM, unless it is ignored (nohup). SIGQUIT keeps its
// default, a core dump: the one way to end a run at once without a checkpoint besides SIGKILL.
#include <string>

namespace pipetrain {

void install_stop_handlers();  // idempotent
int stop_signal();             // the signal received (SIGINT/SIGTERM; SIGHUP as SIGTERM), or 0
const char* stop_signal_name(int signal);  // "SIGINT" or "SIGTERM"

// Thrown by a training loop that stopped on request after checkpointing; main() exits with
// 128 + signal and prints the message.
struct StopRequested {
  int signal = 0;
  std::string message;
};

}  // namespace pipetrain
