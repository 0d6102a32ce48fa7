#pragma once
// Where each worker process sits in a run of w replicas of a p-worker pipeline, each worker
// holding v model chunks. Ranks are replica-major: rank = replica * p + worker, so one replica's
// pipeline is a contiguous block of ranks. Which model stage a worker's chunk holds is the
// schedule's placement (schedule::stage_at): chunk * p + worker when looping (Megatron), a V for
// ZB-V and DualPipeV (worker 0 holds the first and the last stage). No libtorch.
#include <vector>

#include "core/config.h"
#include "schedule/schedule.h"

namespace pipetrain::runtime {

struct Layout {
  int workers = 1;   // p
  int replicas = 1;  // w
  int chunks = 1;    // v
  int rank = 0;
  schedule::Placement placement = schedule::Placement::Looping;

  static Layout of(const Config& config, int rank, schedule::Placement placement) {
    return {int(config.pipeline.stages), int(config.pipeline.dp_width),
            int(config.pipeline.chunks), rank, placement};
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
  int stage_of(int chunk) const { return schedule::stage_at(placement, workers, worker(), chunk); }
  int worker_of_stage(int stage) const { return schedule::worker_at(placement, workers, stage); }
  int chunk_of_stage(int stage) const { return stage / workers; }
  bool holds_stage(int stage) const { return worker_of_stage(stage) == worker(); }
  bool holds_first_stage() const { return holds_stage(0); }
  bool holds_last_stage() const { return holds_stage(stages() - 1); }
  // The worker that writes metrics, checkpoints and the summary: replica 0's last stage.
  bool reports() const { return rank == worker_of_stage(stages() - 1); }

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
