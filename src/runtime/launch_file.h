#pragma once
// What our launcher tells the workers it spawns beyond their config (the same `pipetrain train`
// arguments) and the torchrun variables: written into the run folder and named on each worker's
// command line (`--launch-file PATH`), not passed through environment variables. A worker
// started by torchrun has none and decides these itself. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

namespace pipetrain::runtime {

struct LaunchSettings {
  std::string run_dir;      // the run folder the launcher prepared
  std::string store_file;   // "": rendezvous at MASTER_ADDR:MASTER_PORT (the launcher's TCPStore)
  bool progress = true;     // the reporting worker draws the live progress line
  std::string resume_from;  // the checkpoint every worker resumes from; "": a fresh run
  // data.path's data_fingerprint (io/content_fingerprint.h), read once by the launcher: the
  // checkpoints record it, and no worker reads the data a second time for it.
  std::string data_fingerprint;
  // The cores each of this node's workers is bound to, by local rank ("0-3"); empty: not bound.
  std::vector<std::string> worker_cores;
};

// RUN_DIR/launch-node<K>.json: one per node, as nodes may share the run folder.
std::string launch_file_path(const std::string& run_dir, int64_t node_rank);
void write_launch_file(const std::string& path, const LaunchSettings& settings);
LaunchSettings read_launch_file(const std::string& path);  // UserError naming a bad file

}  // namespace pipetrain::runtime
