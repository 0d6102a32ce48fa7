#include "core/stop_signal.h"

#include <pthread.h>

#include <csignal>

namespace pipetrain {
namespace {

volatile std::sig_atomic_t received = 0;

// A hangup (the terminal closed) stops as SIGTERM does: the run checkpoints instead of dying.
void on_signal(int sig) { received = sig == SIGHUP ? SIGTERM : sig; }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  action.sa_flags = SA_RESTART;  // blocking socket calls (Gloo) carry on
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  // Under nohup (SIGHUP ignored) a closed terminal must not stop the run: ignored stays ignored.
  struct sigaction hangup {};
  if (sigaction(SIGHUP, nullptr, &hangup) == 0 && hangup.sa_handler != SIG_IGN) {
    sigaction(SIGHUP, &action, nullptr);
  }
  // A pipeline worker starts with these blocked (runtime/launcher.cpp): what came meanwhile is
  // delivered now, to the handler.
  sigset_t stops;
  sigemptyset(&stops);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stops, signal);
  pthread_sigmask(SIG_UNBLOCK, &stops, nullptr);  // (the calling thread's mask: the one that starts)
}

int stop_signal() { return received; }

const char* stop_signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

}  // namespace pipetrain
