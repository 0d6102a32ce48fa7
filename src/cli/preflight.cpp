#include "cli/preflight.h"

#include <algorithm>

#include "core/error.h"
#include "core/files.h"
#include "core/machine.h"
#include "core/text.h"
#include "plan/analytic.h"

namespace pipetrain::cli {
namespace {

void check_thread_count(const Config& config) {
  const int64_t most = int64_t(kThreadsPerCore) * cpu_cores();
  if (config.train.threads > most) {
    fail("train.threads {} is more than {} ({} per core on this machine's {} cores); more "
         "threads only slow the run down", config.train.threads, most, kThreadsPerCore, cpu_cores());
  }
}

// Weight-sized state tensors per parameter, at least (a lower bound, like the rest).
int optimizer_states(const TrainConfig& train) {
  const int previous_update = train.delay_correction == "error_feedback" ? 1 : 0;
  if (train.optimizer == "sgd") return (train.momentum > 0 ? 1 : 0) + previous_update;
  if (train.optimizer == "muon") return 1 + previous_update;  // matrices: a momentum only
  return 2 + previous_update;  // adam, adamw: two moments
}

// Computed in double (absurd sizes stay finite): a lower bound, so a run refused here could not
// have run.
// `data_path`: the file read into memory, or "" for none.
void check_memory(const Config& config, const std::string& data_path, const ProcessesHere& here) {
  const auto& m = config.model;
  const auto& p = config.pipeline;
  const plan::GptShape shape{"", m.layers, m.d_model, m.heads, m.seq_len, m.vocab_size};
  const double replicas = double(p.dp_width);
  const double microbatch =
      std::max(1.0, double(config.train.batch_size) / (double(config.train.microbatches) * replicas));
  const plan::TrainingMemory model =
      plan::training_memory_lower_bound(shape, m.dtype == "float64" ? 8 : 4,
                                        optimizer_states(config.train), microbatch);
  // Each worker holds one stage of a replica: these workers' share of all layers, in layers.
  const double share = here.workers / double(p.stages);
  const double processes = here.workers + (here.launcher ? 1 : 0);
  // Byte-level text is read into memory; token files are memory-mapped (docs/data.md).
  const double data = data_path.empty() ? 0 : double(regular_file_size(data_path, "data file"));
  const double needed = model.total() * share + data + processes * kProcessBytes;
  const double available = machine_memory_bytes();
  if (needed <= available) return;
  fail("this run needs at least {} of memory (weights, gradients and {} state {}, one "
       "microbatch's activations {}, the data file {}, {:.0f} process(es) x {}), more than this "
       "machine's {}", format_bytes(needed), config.train.optimizer,
       format_bytes(model.weights_gradients_optimizer * share), format_bytes(model.activations * share),
       format_bytes(data), processes, format_bytes(kProcessBytes), format_bytes(available));
}

}  // namespace

void check_run_fits_machine(const Config& config, const std::string& data_root,
                            const ProcessesHere& here) {
  check_thread_count(config);
  // Only byte-level text counts its file here; other formats' readers name a missing file in
  // their own words (how to make or install it).
  const bool text_bytes = config.data.format == "bytes";
  check_memory(config, text_bytes ? resolve_existing_path(config.data.path, data_root) : "", here);
}

}  // namespace pipetrain::cli
