#include "runtime/model_costs.h"

#include <algorithm>

#include "device/reductions.h"
#include "model/registry.h"

namespace pipetrain::runtime {

double optimizer_values_per_parameter(const TrainConfig& train) {
  double states = 2;  // adam, adamw
  if (train.optimizer == "sgd") states = train.momentum != 0 ? 1 : 0;
  if (train.optimizer == "muon") states = 1;
  const double previous_update = train.delay_correction == "error_feedback" ? 1 : 0;
  return 1 + states + previous_update;
}

double optimizer_step_temporaries(const TrainConfig& train) {
  const double decayed_gradient = train.weight_decay != 0 ? 1 : 0;
  if (train.optimizer == "sgd") return decayed_gradient;
  if (train.optimizer == "adam") return 2 + decayed_gradient;
  if (train.optimizer == "adamw") return 0;  // the fused kernel works in place
  return 2;  // muon: its matrices' Newton-Schulz iterates (not measured)
}

namespace {

// values_per_parameter: the gradient and the states beside the weight.
double traffic_values(double values_per_parameter, double step_temporaries) {
  return 2 + 2 + 2 * (values_per_parameter - 1) + 2 * step_temporaries;
}

}  // namespace

double optimizer_traffic_values(const TrainConfig& train) {
  return traffic_values(optimizer_values_per_parameter(train), optimizer_step_temporaries(train));
}

ModelCostOptions model_cost_options(const Config& config) {
  ModelCostOptions options;
  const device::Precision precision = model_precision(config.model);
  options.bytes_per_value = double(c10::elementSize(precision.parameter_dtype()));
  options.activation_bytes_per_value = precision.activation_bytes();
  options.optimizer_values_per_parameter = optimizer_values_per_parameter(config.train);
  options.optimizer_step_temporaries = optimizer_step_temporaries(config.train);
  options.norm_bytes_per_value =
      precision.parameter_dtype() == c10::kDouble ? 0 : device::kSquaredSumBytesPerValue;
  return options;
}

ModelCostOptions model_cost_options(const Config& config, const plan::ClusterSpec& cluster) {
  ModelCostOptions options = model_cost_options(config);
  const double rate = cluster.device_flops * cluster.compute_efficiency;
  options.bytes_per_s = cluster.memory_bandwidth > 0 ? cluster.memory_bandwidth
                                                     : options.bytes_per_s * rate / options.flops_per_s;
  options.flops_per_s = rate;
  options.half_efficiency_rows = cluster.half_efficiency_tokens;
  options.seconds_per_operator = cluster.operator_s;
  options.launch_seconds_per_operator = config.train.cuda_graphs == 1 ? 0 : cluster.launch_s;
  options.gpu = cluster.gpus;
  return options;
}

namespace {

// The layer's work as the options' devices do it (a GPU's own kernels: LayerWork::on_gpu).
LayerWork as_run_on(LayerWork work, bool gpu) {
  if (!gpu) return work;
  const auto take = [](double& value, double on_gpu) {
    if (on_gpu >= 0) value = on_gpu;
  };
  take(work.forward_traffic_values, work.on_gpu.forward_traffic_values);
  take(work.backward_traffic_values, work.on_gpu.backward_traffic_values);
  take(work.forward_operators, work.on_gpu.forward_operators);
  take(work.backward_operators, work.on_gpu.backward_operators);
  return work;
}

// A layer's pass times at the options' rates: its products (slower over few rows) and
// memory-bound values, the weights and output it streams, and each operator's fixed cost.
struct PassTimes {
  const LayerWork& work;
  const ModelCostOptions& options;
  double flops_per_s =
      options.flops_per_s * plan::small_gemm_share(work.product_rows, options.half_efficiency_rows);
  double streaming_s = (work.parameters + work.output_values) * options.bytes_per_value / options.bytes_per_s;

  double work_s(double flops, double traffic_values) const {
    return flops / flops_per_s + traffic_values * options.activation_bytes_per_value / options.bytes_per_s;
  }
  // A pass's operators cost their fixed time beside its work; a host that issues them to an
  // asynchronous device more slowly than it runs them sets the pace.
  double pass_s(double device_s, double operators) const {
    return std::max(device_s + operators * options.seconds_per_operator,
                    operators * options.launch_seconds_per_operator);
  }
  void set(plan::LayerCost& cost) const {
    cost.forward_s = pass_s(streaming_s + work_s(work.forward_flops, work.forward_traffic_values),
                            work.forward_operators);
    // The backward's two halves (input and weight gradient) cost a forward each unless the
    // model says otherwise, plus what it recomputes, which a split backward recomputes in both
    // passes. W is the weight products.
    const double recompute_s = work_s(work.backward_recompute_flops, work.backward_recompute_values);
    const double backward_work_s =
        work_s(work.backward_flops >= 0 ? work.backward_flops : 2 * work.forward_flops,
               work.backward_traffic_values >= 0 ? work.backward_traffic_values : 2 * work.forward_traffic_values);
    cost.backward_s = pass_s(2 * streaming_s + recompute_s + backward_work_s, work.backward_operators);
    if (work.weight_gradient_flops > 0) {
      const double products_s = work.weight_gradient_flops / flops_per_s;
      cost.weight_s = products_s + recompute_s;
      cost.input_s = cost.backward_s - products_s;
    }
  }
};

}  // namespace

std::vector<plan::LayerCost> model_plan_costs(const Model& model, int64_t microbatch,
                                              const ModelCostOptions& options) {
  const double value = options.bytes_per_value, activation = options.activation_bytes_per_value;
  std::vector<plan::LayerCost> costs;
  double received = 0;  // the first layer's input (token ids, images) is the batch's: not counted
  for (int64_t layer = 0; layer < model.layer_count(); ++layer) {
    const LayerWork work = model.layer_work(layer, microbatch);
    plan::LayerCost cost;
    cost.name = model.layer_name(layer);
    const LayerWork run = as_run_on(work, options.gpu);
    PassTimes{run, options}.set(cost);
    cost.param_bytes = work.parameters * value;
    cost.optimizer_bytes = options.optimizer_values_per_parameter * cost.param_bytes;
    cost.optimizer_s = traffic_values(options.optimizer_values_per_parameter, options.optimizer_step_temporaries) *
                       cost.param_bytes / options.bytes_per_s;
    cost.output_bytes = work.output_values * activation;
    cost.activation_bytes = (work.stashed_values > 0 ? work.stashed_values : work.output_values) * activation;
    cost.workspace_bytes = work.workspace_values * activation;
    if (work.backward_workspace_values >= 0) cost.backward_workspace_bytes = work.backward_workspace_values * activation;
    cost.weight_pass_bytes = work.weight_pass_values * activation;
    if (work.input_pass_values > 0) cost.input_pass_peak_bytes = work.input_pass_values * activation;
    if (work.weight_workspace_values > 0) cost.weight_workspace_bytes = work.weight_workspace_values * activation;
    const double largest = work.largest_parameter_values > 0 ? work.largest_parameter_values : work.parameters;
    // The norm's temporary is freed before the step makes its own.
    cost.optimizer_workspace_bytes = std::max(options.optimizer_step_temporaries * value,
                                              options.norm_bytes_per_value) * largest;
    cost.input_bytes = received;
    cost.shared_param_bytes = work.shared_values * value;
    cost.shared_optimizer_bytes = options.optimizer_values_per_parameter * cost.shared_param_bytes;
    cost.shared_with = int(work.shared_with);
    costs.push_back(cost);
    received = cost.output_bytes;
  }
  return costs;
}

}  // namespace pipetrain::runtime
