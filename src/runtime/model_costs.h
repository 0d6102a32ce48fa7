#pragma once
// A model's per-layer costs for the planner when the model runs here (`pipetrain plan --config`):
// times from its analytic FLOPs and bytes (Model::layer_work) at a given compute rate, and the
// runtime's memory: weights, gradient and optimizer state per parameter, the values each layer
// stashes per microbatch, its transient workspace, the activation a stage receives, and the
// second copy of a shared parameter. No libtorch in this header.
#include <cstdint>
#include <vector>

#include "core/config.h"
#include "plan/cluster.h"
#include "plan/partition.h"

namespace pipetrain {
class Model;
}

namespace pipetrain::runtime {

struct ModelCostOptions {
  // Defaults: one CPU core (clusters/this-machine.toml), what the "balanced" partition balances.
  double flops_per_s = 50e9;   // sustained by one worker
  double bytes_per_s = 16e9;   // its memory bandwidth (a layer streams weights and output)
  // Rows at which its products reach half that rate (a cluster's half_efficiency_tokens, applied
  // to each layer's LayerWork::product_rows; bench/device_rates measures it); 0: none.
  double half_efficiency_rows = 0;
  // An operator's fixed cost and the host's time to issue one (plan::ClusterSpec's operator_s,
  // launch_s; none with CUDA graphs), times each layer's LayerWork operators; 0: none.
  double seconds_per_operator = 0, launch_seconds_per_operator = 0;
  // The devices are GPUs (a cluster's `device`): layers' LayerWork::on_gpu work replaces a CPU's.
  bool gpu = false;
  double bytes_per_value = 4;  // weights, gradients, optimizer state: model.dtype (float32 if mixed)
  // Stashed, sent and transient activations (LayerWork's values): bfloat16's 2 under mixed
  // precision, where the model counts what it keeps in float32 (and autocast's bfloat16 copies
  // of its weights) in such values.
  double activation_bytes_per_value = 4;
  // Held per parameter beside its weights: the gradient and the optimizer's state.
  double optimizer_values_per_parameter = 3;
  // Tensors of its largest parameter's size the optimizer's step makes (optimizer_step_temporaries).
  double optimizer_step_temporaries = 2;
  // Before the step, the global gradient norm's temporaries per value of the largest gradient
  // (device/reductions.h squared_sum: its rows' partial norms on the CPU, 12 bytes per 4096
  // values, which model_cost_options sets; none for float64).
  double norm_bytes_per_value = 0;
};

// Gradient + optimizer state values per parameter for train: SGD 1 + (momentum ? 1 : 0), Adam
// and AdamW 3, Muon 2 (its matrices keep one momentum; taken for all parameters, the AdamW part
// is small), and one more with the error-feedback correction (the previous update).
double optimizer_values_per_parameter(const TrainConfig& train);
// Measured (GptUpdateMemory.*): none for AdamW (train/adamw_step.h's fused kernel works in place),
// Adam's denominator (sqrt, then divided) and its decayed gradient, SGD's decayed gradient (each
// only with weight decay); Muon: 2, not measured.
double optimizer_step_temporaries(const TrainConfig& train);
// Values the update reads and writes per parameter (its time: these bytes at the memory rate):
// the weight read and written, the gradient read twice (the global norm, the step), each state
// value read and written (AdamW 8 in all, SGD 4), and each temporary written and read.
double optimizer_traffic_values(const TrainConfig& train);
ModelCostOptions model_cost_options(const Config& config);
// The rates of one of the cluster's devices, as `plan --config` takes them: its sustained
// FLOP rate (peak x compute_efficiency, less with few rows: half_efficiency_tokens), its
// memory bandwidth (not given: one CPU core's, scaled by that rate), and an operator's fixed
// costs (a launch's only when the config's train.cuda_graphs does not replay graphs).
ModelCostOptions model_cost_options(const Config& config, const plan::ClusterSpec& cluster);

std::vector<plan::LayerCost> model_plan_costs(const Model& model, int64_t microbatch,
                                              const ModelCostOptions& options);

}  // namespace pipetrain::runtime
