#include "cli/preflight.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/files.h"
#include "core/machine.h"
#include "core/text.h"
#include "device/execution.h"
#include "device/placement.h"
#include "model/registry.h"
#include "runtime/model_costs.h"
#include "runtime/run_spec.h"

namespace pipetrain::cli {
namespace {

void check_thread_count(const Config& config) {
  const int64_t most = most_compute_threads();
  if (config.train.threads > most) {
    fail("train.threads {} is more than {} ({} per core on this machine's {} cores); more "
         "threads only slow the run down", config.train.threads, most, kThreadsPerCore, cpu_cores());
  }
}

// A lower bound of what training holds of the model's layers [first of them, ...): weights,
// gradient and optimizer state per parameter, and one microbatch's kept activations, from the
// model's own LayerWork; summed in double (absurd sizes stay finite) and only until `enough`
// (a billion-layer model stops at its first few thousand).
struct ModelMemory {
  double weights_gradients_optimizer = 0, activations = 0;
  double total() const { return weights_gradients_optimizer + activations; }
};
ModelMemory model_memory_lower_bound(const Model& model, const Config& config, double microbatch,
                                     double share, double enough) {
  const runtime::ModelCostOptions options = runtime::model_cost_options(config);
  const double per_parameter = options.bytes_per_value * (1 + options.optimizer_values_per_parameter);
  ModelMemory memory;
  const auto rows = int64_t(std::min(microbatch, 9e18));
  for (int64_t layer = 0; layer < model.layer_count() && memory.total() * share <= enough; ++layer) {
    const LayerWork work = model.layer_work(layer, rows);
    memory.weights_gradients_optimizer += work.parameters * per_parameter;
    const double kept = work.stashed_values > 0 ? work.stashed_values : work.output_values;
    memory.activations += kept * options.activation_bytes_per_value;
  }
  return memory;
}

// `data_path`: the file read into memory, or "" for none.
void check_memory(const Config& config, const std::string& data_path, const ProcessesHere& here) {
  const auto& p = config.pipeline;
  const double microbatch = double(runtime::microbatch_rows_of(config));
  // Each worker holds one stage of a replica: these workers' share of all layers, in layers.
  const double share = here.workers / double(p.stages);
  const double processes = here.workers + (here.launcher ? 1 : 0);
  // Byte-level text is read into memory; token files are memory-mapped (docs/data.md).
  const double data = data_path.empty() ? 0 : double(regular_file_size(data_path, "data file"));
  const double available = machine_memory_bytes();
  // On GPUs the model's bytes are the GPUs' (each holds the shares of the workers that use it);
  // the host keeps the data and the processes.
  const auto execution = device::decide_execution_here(config.train.device, config.model.dtype,
                                                       int(std::max(1.0, here.workers)));
  const bool gpus = execution.device == device::DeviceKind::Cuda;
  const double per_gpu = gpus ? std::ceil(std::max(1.0, here.workers) / execution.gpus) / double(p.stages) : 0;
  const double gpu_memory = gpus ? double(device::gpu_memory_bytes(0)) : 0;
  const ModelMemory model = model_memory_lower_bound(*make_model(config), config, microbatch,
                                                     gpus ? per_gpu : share, gpus ? gpu_memory : available);
  if (gpus && model.total() * per_gpu > gpu_memory) {
    fail("this run needs at least {} of GPU memory per GPU (weights, gradients and {} state {}, "
         "one microbatch's activations {}), more than the GPU's {}",
         format_bytes(model.total() * per_gpu), config.train.optimizer,
         format_bytes(model.weights_gradients_optimizer * per_gpu),
         format_bytes(model.activations * per_gpu), format_bytes(gpu_memory));
  }
  const double on_host = gpus ? 0 : model.total() * share;
  const double needed = on_host + data + processes * kProcessBytes;
  if (needed <= available) return;
  fail("this run needs at least {} of memory (weights, gradients and {} state {}, one "
       "microbatch's activations {}, the data file {}, {:.0f} process(es) x {}), more than this "
       "machine's {}", format_bytes(needed), config.train.optimizer,
       format_bytes(gpus ? 0 : model.weights_gradients_optimizer * share),
       format_bytes(gpus ? 0 : model.activations * share),
       format_bytes(data), processes, format_bytes(kProcessBytes), format_bytes(available));
}

}  // namespace

int64_t most_compute_threads() { return int64_t(kThreadsPerCore) * cpu_cores(); }

void check_run_fits_machine(const Config& config, const std::string& data_root,
                            const ProcessesHere& here) {
  check_thread_count(config);
  // Only byte-level text counts its file here; other formats' readers name a missing file in
  // their own words (how to make or install it).
  const bool text_bytes = config.data.format == "bytes";
  check_memory(config, text_bytes ? resolve_existing_path(config.data.path, data_root) : "", here);
}

}  // namespace pipetrain::cli
