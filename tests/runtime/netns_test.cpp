// Multi-host: two workers in two network namespaces joined by a veth pair (two "hosts" with
// their own addresses, reachable only over that link) run a 2-stage job under the torchrun
// contract, and end with the same weight bytes as the same job on one host. Needs root and
// `ip netns`; skipped with the reason otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "core/files.h"
#include "../pipetrain_run.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

int sh(const std::string& command) { return std::system((command + " >/dev/null 2>&1").c_str()); }

class TwoHosts {
 public:
  TwoHosts() : a_(fmt::format("ptA{}", getpid())), b_(fmt::format("ptB{}", getpid())) {
    if (geteuid() != 0) reason_ = "needs root (creates network namespaces)";
    else if (sh("ip netns add " + a_) != 0) reason_ = "`ip netns add` failed (no ip tool or no CAP_SYS_ADMIN)";
    else ok_ = setup();
  }
  ~TwoHosts() {
    sh("ip netns del " + a_);
    sh("ip netns del " + b_);
  }
  const std::string& skip_reason() const { return reason_; }
  bool ok() const { return ok_; }
  // Runs in that host's namespace, Gloo bound to its veth end.
  std::string exec_in(int host) const {
    return "ip netns exec " + (host == 0 ? a_ : b_) + " env GLOO_SOCKET_IFNAME=" + (host == 0 ? va_ : vb_);
  }
  static constexpr const char* kAddressA = "10.231.7.1";

 private:
  bool setup() {
    const std::string& va = va_;
    const std::string& vb = vb_;
    const std::vector<std::string> steps = {
        "ip netns add " + b_,
        fmt::format("ip link add {} type veth peer name {}", va, vb),
        fmt::format("ip link set {} netns {}", va, a_), fmt::format("ip link set {} netns {}", vb, b_),
        fmt::format("ip -n {} addr add 10.231.7.1/24 dev {}", a_, va),
        fmt::format("ip -n {} addr add 10.231.7.2/24 dev {}", b_, vb),
        fmt::format("ip -n {} link set {} up", a_, va), fmt::format("ip -n {} link set {} up", b_, vb),
        fmt::format("ip -n {} link set lo up", a_), fmt::format("ip -n {} link set lo up", b_)};
    for (const auto& step : steps) {
      if (sh(step) != 0) {
        reason_ = "network setup failed: " + step;
        return false;
      }
    }
    return true;
  }
  std::string a_, b_, reason_;
  std::string va_ = "va" + std::to_string(getpid() % 100000), vb_ = "vb" + std::to_string(getpid() % 100000);
  bool ok_ = false;
};

TEST(MultiHost, TwoStagesAcrossTwoNetworkNamespaces) {
  TwoHosts hosts;
  if (!hosts.ok()) GTEST_SKIP() << hosts.skip_reason();
  const std::string args =
      "train --quiet --model.layers 2 --model.d_model 32 --model.heads 2 --model.seq_len 16 "
      "--train.batch_size 4 --train.microbatches 2 --train.threads 1 --train.steps 4 "
      "--eval.every 0 --eval.batches 1 --sample.tokens 0 --pipeline.timeout_s 60 --stages 2";
  const auto here = testing::fresh_dir("netns_local"), there = testing::fresh_dir("netns");
  ASSERT_EQ(testing::run_pipetrain(args + " --run-dir " + here.string()).exit_code, 0);

  // Rank 0 hosts the rendezvous store on host A's address; rank 1 reaches it over the veth.
  const std::string binary = std::string(PIPETRAIN_BINARY_DIR) + "/pipetrain";
  const std::string env = fmt::format("WORLD_SIZE=2 MASTER_ADDR={} MASTER_PORT=29731", TwoHosts::kAddressA);
  const auto run = testing::run_pipetrain(
      args + " --run-dir " + there.string(),
      "(" + hosts.exec_in(0) + " " + env + " RANK=0 timeout 120 " + binary + " " + args +
          " --run-dir " + there.string() + " >" + there.string() + ".rank0.log 2>&1 &); " +
          hosts.exec_in(1) + " " + env + " RANK=1");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    EXPECT_TRUE(read_file((there / "checkpoint" / file).string()) ==
                read_file((here / "checkpoint" / file).string()))
        << file << ": the two-host run must equal the one-host run";
  }
  fs::remove_all(here);
  fs::remove_all(there);
  fs::remove(there.string() + ".rank0.log");
}

}  // namespace
}  // namespace pipetrain
