// A one-machine run binds nothing beyond loopback: Gloo binds 127.0.0.1 and the rendezvous goes
// through a file, not a TCPStore server (which would listen on every interface). The test holds a
// run at step 3 (rank 1 stops itself), reads every socket the launcher and its workers own from
// /proc, and checks that each listening one is on 127.0.0.1 or ::1.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  std::error_code error;
  for (const auto& fd : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", error)) {
    const std::string target = fs::read_symlink(fd.path(), error).string();
    if (target.rfind("socket:[", 0) == 0) inodes.insert(target.substr(8, target.size() - 9));
  }
  return inodes;
}

struct Listener {
  std::string local_address;  // hex, as /proc/net/tcp{,6} writes it
  bool loopback;
};

// Listening sockets among `inodes`, and how many of `inodes` the tables hold at all.
std::vector<Listener> listeners(const std::set<std::string>& inodes, int& found) {
  std::vector<Listener> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
      if (!inodes.count(inode)) continue;
      ++found;
      if (state != "0A") continue;  // 0A: LISTEN
      const std::string address = local.substr(0, local.find(':'));
      const bool loopback = address == "0100007F" ||                          // 127.0.0.1
                            address == "00000000000000000000000001000000" ||  // ::1
                            address == "0000000000000000FFFF00000100007F";    // ::ffff:127.0.0.1
      out.push_back({local, loopback});
    }
  }
  return out;
}

pid_t parent_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  std::istringstream after(text.substr(text.rfind(')') + 2));
  char state;
  pid_t parent = 0;
  after >> state >> parent;
  return parent;
}

char state_of(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  const auto close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

TEST(Loopback, OneMachineRunListensOnLoopbackOnly) {
  const auto dir = testing::fresh_dir("loopback");
  const std::string args =
      "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
      "--train.batch_size 4 --train.threads 1 --train.steps 50 --eval.every 0 --eval.batches 1 "
      "--sample.tokens 0 --pipeline.timeout_s 600 --stages 2 --microbatches 2 --run-dir " +
      dir.string();
  auto run = std::async(std::launch::async,
                        [&] { return testing::run_pipetrain(args, "PIPETRAIN_FAULT=1:3:hang"); });
  // Wait until rank 1 has stopped itself: rendezvous and every connection are up by then. No
  // clock of its own: the run's timeout bounds the wait (a run that ends early ends it).
  const auto running = [&] { return run.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready; };
  std::vector<pid_t> workers;
  while (workers.size() != 2 && running()) {
    workers.clear();
    std::ifstream pids(dir / "workers.pid");
    for (pid_t pid; pids >> pid;) workers.push_back(pid);
  }
  ASSERT_EQ(workers.size(), 2u) << run.get().output;
  // However the test leaves, the stopped worker goes on, so the run can end.
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{workers[1]};
  while (state_of(workers[1]) != 'T' && running()) {
  }
  ASSERT_EQ(state_of(workers[1]), 'T') << run.get().output;
  std::set<std::string> inodes;
  for (pid_t pid : {workers[0], workers[1], parent_of(workers[0])}) {
    const auto mine = socket_inodes(pid);
    inodes.insert(mine.begin(), mine.end());
  }
  int found = 0;
  const auto listening = listeners(inodes, found);
  EXPECT_GE(found, 2) << "no TCP socket of the run was found: the check would be vacuous";
  for (const auto& l : listening) EXPECT_TRUE(l.loopback) << "listening on " << l.local_address;
  kill(workers[1], SIGCONT);  // the run goes on (its peers wait up to pipeline.timeout_s) and ends
  const auto result = run.get();
  EXPECT_EQ(result.exit_code, 0) << result.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace pipetrain
