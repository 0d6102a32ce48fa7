#pragma once
// Where each worker process sits in a run of w replicas of a p-worker pipeline, each worker
// holding v model chunks. Ranks are replica-major: rank = replica * p + worker, so one replica's
// pipeline is a contiguous block of ranks. Model stage = chunk * p + worker (Megatron's looping
// placement, as in schedule::Schedule::stage_of). No libtorch.
#include <vector>

#include "core/config.h"

namespace pipetrain::runtime {

struct Layout {
  int workers = 1;   // p
  int replicas = 1;  // w
  int chunks = 1;    // v
  int rank = 0;

  static Layout of(const Config& config, int rank) {
    return {int(config.pipeline.stages), int(config.pipeline.dp_width),
            int(config.pipeline.chunks), rank};
  }
  static Layout of_rank(Layout layout, int rank) {
    layout.rank = rank;
    return layout;
  }
  int world() const { return workers * replicas; }
  int stages() const { return workers * chunks; }
  int replica() const { return rank / workers; }
  int worker() const { return rank % workers; }
  int rank_of(int replica, int worker) const { return replica * workers + worker; }
  int stage_of(int chunk) const { return chunk * workers + worker(); }
  bool holds_first_stage() const { return worker() == 0; }
  bool holds_last_stage() const { return worker() == workers - 1; }
  // The worker that writes metrics, checkpoints and the summary: replica 0's last stage.
  bool reports() const { return rank == workers - 1; }

  std::vector<int> replica_group() const {  // this worker in every replica
    std::vector<int> ranks;
    for (int r = 0; r < replicas; ++r) ranks.push_back(rank_of(r, worker()));
    return ranks;
  }
  std::vector<int> pipeline_group() const {  // every worker of this replica
    std::vector<int> ranks;
    for (int k = 0; k < workers; ++k) ranks.push_back(rank_of(replica(), k));
    return ranks;
  }
};

}  // namespace pipetrain::runtime
