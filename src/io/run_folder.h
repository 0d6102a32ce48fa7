#pragma once
// What a run folder holds besides config.toml: metrics.jsonl, loss.svg, summary.json,
// sample.txt, trace.json, timeline.svg, plan.json, workers.pid, launch-node<K>.json, run.lock, the final checkpoint/
// and the periodic checkpoints/ (io/checkpoint_dir.h). Everything here removes files by those names only, so a
// run folder shared with the user's own files, or a mistaken --run-dir, loses nothing else.
#include <string>

namespace pipetrain {

// Held while a run trains in its folder, so that a second `train` on it (--resume, or
// --overwrite) is refused instead of both pruning each other's checkpoints: an exclusive flock on
// RUN/run.lock, which holds the holder's pid. The kernel releases it when the process ends,
// however it ends (kill -9 included): a lock never outlives its run.
class RunFolderLock {
 public:
  // Creates the folder if needed. UserError naming the folder and the holder's pid when another
  // process holds the lock.
  explicit RunFolderLock(const std::string& run_dir);
  ~RunFolderLock();
  RunFolderLock(RunFolderLock&& other) noexcept;
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;
  RunFolderLock& operator=(RunFolderLock&&) = delete;

 private:
  int fd_ = -1;
};

// The same refusal before a resume reads anything, the lock then released (the run takes it
// again in prepare_run_folder): nothing but "in use" is said about a folder another run writes.
void refuse_run_folder_in_use(const std::string& run_dir);

// The run folder before a run starts, locked for the run (keep the lock until it ends). A
// resumed run: removes what interrupted writes left. A new run: refuses a folder that already
// holds a run unless `overwrite` (core/files.h's prepare_run_dir); with `overwrite`, removes
// the previous run's outputs first, so nothing of it (a checkpoint to resume from, a metrics
// line) mixes with the new run.
[[nodiscard]] RunFolderLock prepare_run_folder(const std::string& run_dir, bool resume, bool overwrite);

// The previous run's outputs, if `run_dir` holds a run (metrics.jsonl): its checkpoints,
// `latest`, the final checkpoint/, metrics, plots, traces, summary and sample. config.toml
// stays (the new run rewrites it).
void remove_previous_run(const std::string& run_dir);

// What an interrupted write (kill -9) leaves: checkpoints/step-N.partial and step-N.old
// folders, and the NAME.tmp.PID files of atomic writes of the run's own files. A resumed run
// removes them before it starts.
void remove_interrupted_writes(const std::string& run_dir);

// The run's outputs present in `run_dir`, as `train`'s last line names them ("metrics.jsonl,
// config.toml, checkpoint/, ..., summary.json"): a run without a sample or a trace names only
// what is there.
std::string run_folder_outputs(const std::string& run_dir);

}  // namespace pipetrain
