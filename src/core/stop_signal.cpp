#include "core/stop_signal.h"

#include <csignal>

namespace pipetrain {
namespace {

volatile std::sig_atomic_t received = 0;

void on_signal(int sig) { received = sig; }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // blocking socket calls (Gloo) carry on
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return received; }

}  // namespace pipetrain
