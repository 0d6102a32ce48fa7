#pragma once
// Helpers for tests that run the real `pipetrain` binary (launcher + worker processes).
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "temp_folders.h"

namespace pipetrain::testing {

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout + stderr
  double seconds = 0;
};

// `timeout` guards CI against a hang whatever the bug: a run that hangs fails, not blocks.
// `program`: a command line (a program linking pipetrain, a build step, ...).
inline ProcessResult run_program(const std::string& program, const std::string& args,
                                 const std::string& env = "", int timeout_s = 300) {
  const std::string command = env + " timeout " + std::to_string(timeout_s) + " " + program +
                              " " + args + " 2>&1";
  const auto start = std::chrono::steady_clock::now();
  FILE* pipe = popen(command.c_str(), "r");
  ProcessResult result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

inline ProcessResult run_pipetrain(const std::string& args, const std::string& env = "",
                                   int timeout_s = 300) {
  return run_program(std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain", args, env, timeout_s);
}

// What every user error must look like: exit code 2 and one line `pipetrain: error: ...`.
inline void expect_one_line_error(const std::string& args, const std::string& fragment,
                                  int timeout_s = 300) {
  const ProcessResult result = run_pipetrain(args, "", timeout_s);
  EXPECT_EQ(result.exit_code, 2) << args << "\n" << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  EXPECT_EQ(result.output.rfind("pipetrain: error: ", 0), 0u) << result.output;
  EXPECT_NE(result.output.find(fragment), std::string::npos) << result.output;
}

inline std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("pipetrain_runtime_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  test::remove_at_exit(dir);
  return dir;
}

// A loopback port for a rendezvous the test starts itself, kept from the kernel's own picks
// until the rendezvous binds it: a connection to it is accepted and closed from the listening
// side, which leaves the port in TIME_WAIT for about a minute. Meanwhile bind(0) and connect()
// elsewhere (another test beside this one) skip it, while a listener that sets SO_REUSEADDR, as
// c10d's TCPStore does, binds it. (A port found free and released at once could be handed to
// another test before the rendezvous binds it.)
inline int free_port() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address);
  listen(listener, 1);
  socklen_t length = sizeof address;
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address);
  const int accepted = accept(listener, nullptr, nullptr);
  close(accepted);  // the listening side closes first: its end waits in TIME_WAIT
  close(client);
  close(listener);
  return ntohs(address.sin_port);
}

}  // namespace pipetrain::testing
