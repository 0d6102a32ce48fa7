#include "profile/layer_profile.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "device/execution.h"
#include "device/host_reads.h"
#include "device/placement.h"
#include "model/batch_source.h"
#include "model/registry.h"
#include "runtime/run_spec.h"
#include "runtime/split_backward.h"
#include "train/optim.h"

namespace pipetrain::profile {
namespace {

using Clock = std::chrono::steady_clock;

// `work` followed by a wait for the device: a GPU runs what the host queued after the host
// returns, so a timing ends when the device is done (nothing to wait for on the CPU).
std::function<void()> synced(const c10::Device& device, std::function<void()> work) {
  return [device, work = std::move(work)] {
    work();
    device::synchronize(device);
  };
}

struct HostReadCounts {
  int64_t forward = 0, backward = 0;
};

struct LayerTiming {
  double forward_s, backward_s;
  // Zero-bubble's split backward as the runtime runs it (runtime::SplitBackward): B, the input
  // gradient, and W, the weight gradients from what B recorded. Timed rather than inferred from
  // the whole backward: a chunked cross-entropy head recomputes its logits in each pass.
  double input_pass_s, weight_pass_s;
  double weight_pass_bytes;  // what B records for W (if measured)
};

// What each layer takes for one microbatch: the data for the first, then the outputs of the
// layers before it on that data. (Random values of the boundary's shape would not do: the
// transducer's boundary carries its frames' mask, which the loss reads.)
std::vector<torch::Tensor> layer_inputs(const std::vector<std::shared_ptr<StageModule>>& layers,
                                        const Microbatch& example) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> inputs{example.inputs};
  for (size_t i = 0; i + 1 < layers.size(); ++i) inputs.push_back(layers[i]->forward(inputs.back()));
  return inputs;
}

// Layer `index`'s input for a timing or a count: the data for the first (no gradient asked of
// it), else a fresh leaf copy of `given` that takes its gradient.
torch::Tensor fresh_layer_input(int64_t index, const Microbatch& example, const torch::Tensor& given) {
  if (index == 0) return example.inputs;
  return given.detach().clone().requires_grad_(true);
}

// The layer's forward as in training; the last layer's includes the loss.
torch::Tensor layer_output(StageModule& layer, const Model& model, int64_t index,
                           const Microbatch& example, const torch::Tensor& input) {
  auto out = layer.forward(input);
  return index == model.layer_count() - 1 ? layer.loss(out, example.labels) : out;
}

// Forward builds the autograd graph as in training. `layer` is the one-layer stage
// [index, index + 1) of `model`, `given` its input for `example`; the last layer's time
// includes the loss.
LayerTiming time_layer(StageModule& layer, const Model& model, int64_t index, const Microbatch& example,
                       const torch::Tensor& given, int repeats, const c10::Device& device,
                       bool measure_weight_pass) {
  const auto make_input = [&] { return fresh_layer_input(index, example, given); };
  const auto output_of = [&](const torch::Tensor& input) {
    return layer_output(layer, model, index, example, input);
  };
  torch::Tensor input, output, grad;
  std::unique_ptr<runtime::SplitBackward> split;
  const auto fresh_graph = [&] {
    split.reset();
    layer.zero_grad();
    input = make_input();
    output = output_of(input);
    grad = torch::ones_like(output);
  };
  const auto input_pass = [&] {
    split = std::make_unique<runtime::SplitBackward>(std::vector<torch::Tensor>{output},
                                                     std::vector<torch::Tensor>{grad}, input,
                                                     layer.parameters());
  };
  LayerTiming timing{};
  timing.forward_s = median_seconds(repeats, synced(device, [&] { input = make_input(); }),
                                    synced(device, [&] { output = output_of(input); }));
  timing.backward_s = median_seconds(repeats, synced(device, fresh_graph),
                                     synced(device, [&] { output.backward(grad); }));
  // The first layer's input is the data (token ids, images): training never asks for its
  // gradient, so its B does nothing and its W is the whole backward.
  if (index == 0) {
    timing.weight_pass_s = timing.backward_s;
    return timing;
  }
  timing.input_pass_s = median_seconds(repeats, synced(device, fresh_graph), synced(device, input_pass));
  const auto graph_after_input_pass = [&] {
    fresh_graph();
    input_pass();
    // What B recorded for W: the same bytes every time (kept when asked).
    if (measure_weight_pass) timing.weight_pass_bytes = double(split->held_gradient_bytes());
  };
  timing.weight_pass_s = median_seconds(repeats, synced(device, graph_after_input_pass),
                                        synced(device, [&] { split->weight_pass(); }));
  return timing;
}

// The values one forward (with the loss, for the last layer) and one backward of the layer read
// on the host (device/host_reads.h): each makes a GPU's host wait, and a pass that reads cannot
// be captured as a CUDA graph. Counted apart from the timings (the counting slows dispatch).
HostReadCounts count_host_reads(StageModule& layer, const Model& model, int64_t index,
                                const Microbatch& example, const torch::Tensor& given) {
  layer.zero_grad();
  const torch::Tensor input = fresh_layer_input(index, example, given);
  HostReadCounts counts;
  torch::Tensor output;
  {
    device::HostReads reads;
    output = layer_output(layer, model, index, example, input);
    counts.forward = reads.values();
  }
  device::HostReads reads;
  output.backward(torch::ones_like(output));
  counts.backward = reads.values();
  return counts;
}

// One optimizer step over copies of the layer's parameters (the copies keep the model intact).
double time_optimizer_step(torch::nn::Module& layer, const Model& model, const Config& config,
                           int repeats, const c10::Device& device) {
  std::vector<std::pair<std::string, torch::Tensor>> params;
  for (const auto& item : layer.named_parameters()) {
    const auto& p = item.value();
    // The stage's own names, so the model tells Muon's matrices apart.
    params.emplace_back(item.key(), p.detach().clone().requires_grad_(true));
    params.back().second.mutable_grad() = torch::randn_like(p) * 1e-3;
  }
  if (params.empty()) return 0;
  auto optimizer = make_optimizer(params, config.train, roles_of(model));
  return median_seconds(repeats, [] {}, synced(device, [&] { optimizer->step(); }));
}

// Forward + loss + backward of the whole layer chain for one microbatch.
double time_whole_model(StageModule& whole, const Model& model, int64_t batch, int repeats,
                        const c10::Device& device) {
  auto generator = at::detail::createCPUGenerator(uint64_t(batch));
  const Microbatch example = on_device(model.example(batch, generator), device);
  return median_seconds(repeats, synced(device, [&] { whole.zero_grad(); }), synced(device, [&] {
    whole.loss(whole.forward(example.inputs), example.labels).backward();
  }));
}

// Timings of one (layer, microbatch size), one sample per round.
struct LayerSamples {
  std::vector<double> forward, backward, input_pass, weight_pass;
  double weight_pass_bytes = 0;
  HostReadCounts host_reads;
};

// Layers timed one at a time run slower than inside the chain (measured here: ~10% at 16 x 128
// tokens, from cache state and the allocator), so each microbatch size's layer times are scaled
// to sum to the measured whole-model time. Returns the scale factors, one per microbatch size.
std::vector<double> calibrate_to_whole_model(plan::ModelProfile& profile,
                                             const std::vector<std::vector<double>>& whole_samples) {
  std::vector<double> scales;
  for (size_t k = 0; k < whole_samples.size(); ++k) {
    double layer_sum = 0;
    for (const auto& layer : profile.layers) {
      layer_sum += layer.by_microbatch[k].forward_s + layer.by_microbatch[k].backward_s;
    }
    const double scale = median_of(whole_samples[k]) / layer_sum;
    for (auto& layer : profile.layers) {
      auto& m = layer.by_microbatch[k];
      m.forward_s *= scale, m.backward_s *= scale, m.weight_s *= scale, m.input_s *= scale;
    }
    scales.push_back(scale);
  }
  return scales;
}

}  // namespace

double median_of(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("median_of: no samples");
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double median_seconds(int repeats, const std::function<void()>& prepare,
                      const std::function<void()>& timed) {
  std::vector<double> samples;
  for (int i = 0; i <= repeats; ++i) {  // the first run warms caches and the allocator
    prepare();
    const auto start = Clock::now();
    timed();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) samples.push_back(seconds);
  }
  return median_of(std::move(samples));
}

namespace {

// Round-robin samples: every round times each (layer, size) once and the whole model at each
// size. A slow spell of a shared machine then spoils one sample of many entries, not every
// sample of one entry (which skews the partition).
struct RoundSamples {
  std::vector<std::vector<LayerSamples>> layers;  // [layer][size]
  std::vector<std::vector<double>> whole;         // [size]
};

RoundSamples time_rounds(std::vector<std::shared_ptr<StageModule>>& layers, StageModule& whole,
                         const Model& definition, const std::vector<int64_t>& sizes, int repeats,
                         c10::Device device, const std::function<void(const std::string&)>& progress) {
  RoundSamples samples{std::vector<std::vector<LayerSamples>>(layers.size(), std::vector<LayerSamples>(sizes.size())),
                       std::vector<std::vector<double>>(sizes.size())};
  std::vector<Microbatch> examples;           // [size]
  std::vector<std::vector<torch::Tensor>> inputs;  // [size][layer]
  for (const int64_t size : sizes) {
    auto generator = at::detail::createCPUGenerator(uint64_t(size));
    examples.push_back(on_device(definition.example(size, generator), device));
    inputs.push_back(layer_inputs(layers, examples.back()));
  }
  for (int round = 0; round < repeats; ++round) {
    for (size_t i = 0; i < layers.size(); ++i) {
      for (size_t k = 0; k < sizes.size(); ++k) {
        const LayerTiming t = time_layer(*layers[i], definition, int64_t(i), examples[k], inputs[k][i], 1, device,
                                         round == 0);
        auto& entry = samples.layers[i][k];
        entry.forward.push_back(t.forward_s);
        entry.backward.push_back(t.backward_s);
        entry.input_pass.push_back(t.input_pass_s);
        entry.weight_pass.push_back(t.weight_pass_s);
        if (round == 0) {
          entry.weight_pass_bytes = t.weight_pass_bytes;
          entry.host_reads = count_host_reads(*layers[i], definition, int64_t(i), examples[k], inputs[k][i]);
        }
      }
    }
    for (size_t k = 0; k < sizes.size(); ++k) {
      samples.whole[k].push_back(time_whole_model(whole, definition, sizes[k], 1, device));
    }
    if (progress) progress(fmt::format("round {} of {} timed", round + 1, repeats));
  }
  return samples;
}

// Layer `i`'s profile: its parameters, its optimizer step, and at each size the medians of its
// samples with the bytes the model's own memory model gives it (Model::layer_work, checked
// against the counting allocator: GptLayerMemory.*): what it sends on and what it keeps.
plan::LayerProfile layer_profile(StageModule& layer, const Model& definition, int64_t i, const Config& config,
                                 const std::vector<int64_t>& sizes, const std::vector<LayerSamples>& samples,
                                 int repeats, c10::Device device,
                                 const std::function<void(const std::string&)>& progress) {
  const bool is_head = i == definition.layer_count() - 1;
  plan::LayerProfile measured;
  measured.name = definition.layer_name(i);
  // A stage of this layer alone: the last one's own copies of shared weights included.
  for (const auto& p : layer.parameters()) measured.param_bytes += double(p.numel() * p.element_size());
  // LayerWork counts values of the activation dtype (bfloat16 under mixed precision).
  const double value_bytes = model_precision(config.model).activation_bytes();
  measured.optimizer_s = time_optimizer_step(layer, definition, config, repeats, device);
  for (size_t k = 0; k < sizes.size(); ++k) {
    const auto& entry = samples[k];
    plan::LayerMeasurement m;
    m.microbatch = sizes[k];
    m.forward_s = median_of(entry.forward);
    m.backward_s = median_of(entry.backward);
    m.input_s = median_of(entry.input_pass);
    m.weight_s = median_of(entry.weight_pass);
    m.weight_pass_bytes = entry.weight_pass_bytes;
    m.host_reads_forward = entry.host_reads.forward;
    m.host_reads_backward = entry.host_reads.backward;
    const LayerWork work = definition.layer_work(i, sizes[k]);
    m.output_bytes = is_head ? 0 : value_bytes * work.output_values;
    m.activation_bytes = value_bytes * (work.stashed_values > 0 ? work.stashed_values : work.output_values);
    m.workspace_bytes = value_bytes * work.workspace_values;
    measured.by_microbatch.push_back(m);
    if (progress) {
      progress(fmt::format("{} b={}: forward {:.2f} ms, backward {:.2f} ms (split: B {:.2f} ms, "
                           "W {:.2f} ms)", measured.name, sizes[k], 1e3 * m.forward_s, 1e3 * m.backward_s,
                           1e3 * m.input_s, 1e3 * m.weight_s));
    }
  }
  return measured;
}

// The sizes to time: those asked for (default 1, 2, 4, 8). A model that trains differently at
// each size is timed at the run's own microbatch, which a plan from the profile then keeps.
std::vector<int64_t> sizes_to_time(const Config& config, const Model& model, const std::vector<int64_t>& asked) {
  const std::string dependence = model.microbatch_dependence();
  const int64_t run_microbatch = runtime::microbatch_rows_of(config);
  if (asked.empty()) return dependence.empty() ? std::vector<int64_t>{1, 2, 4, 8} : std::vector<int64_t>{run_microbatch};
  if (!dependence.empty() && std::find(asked.begin(), asked.end(), run_microbatch) == asked.end()) {
    fail("profile: --microbatch-sizes {} leaves out the run's microbatch of {} samples, the one size "
         "a plan can take: {} (another size would train another model)",
         fmt::join(asked, ","), run_microbatch, dependence);
  }
  return asked;
}

// What the profile says of the model: a GPT's shape (`train --plan` sets it), any other model's
// kind (its plans keep the run config's model) and the microbatch it must keep, if any.
void describe_model(const Config& config, const Model& model, plan::ModelProfile& profile) {
  const ModelConfig& m = config.model;
  const std::string name = m.preset.empty() ? m.kind : m.preset;
  profile.model_kind = m.kind;
  profile.shape = m.kind == "gpt" ? plan::GptShape{name, m.layers, m.d_model, m.heads, m.seq_len, m.vocab_size}
                                  : plan::GptShape{name, 0, 0, 0, 0, 0};
  profile.microbatch_dependence = model.microbatch_dependence();
  if (!profile.microbatch_dependence.empty()) profile.fixed_microbatch = runtime::microbatch_rows_of(config);
}

}  // namespace

plan::ModelProfile profile_model_layers(const Config& config, const ProfileOptions& options,
                                        const std::function<void(const std::string&)>& progress) {
  torch::set_num_threads(options.threads);
  const auto definition = make_model(config);
  const std::vector<int64_t> sizes = sizes_to_time(config, *definition, options.microbatch_sizes);
  // On the device a worker of this config computes on (train.device), in its precision.
  const c10::Device device = device::worker_device(
      device::decide_execution_here(config.train.device, config.model.dtype, 1), 0);
  auto model = definition->make_whole();
  model->to(device);
  // Each layer timed as a stage of its own (the last one with its own copies of shared weights).
  std::vector<std::shared_ptr<StageModule>> layers;
  for (int64_t i = 0; i < definition->layer_count(); ++i) {
    layers.push_back(definition->make_stage(i, i + 1));
    layers.back()->to(device);
  }
  plan::ModelProfile profile;
  profile.threads = options.threads;
  profile.device = c10::DeviceTypeName(device.type(), /*lower_case=*/true);
  describe_model(config, *definition, profile);
  profile.description = fmt::format("{}; {}, {} thread(s)", definition->describe(), profile.device,
                                    options.threads);
  // Warm the allocator and BLAS at the largest size first: otherwise the first layer timed
  // pays for it (block 0 measured 2.7x its peers).
  time_whole_model(*model, *definition, *std::max_element(sizes.begin(), sizes.end()), 1, device);
  const RoundSamples samples = time_rounds(layers, *model, *definition, sizes, options.repeats, device, progress);
  for (size_t i = 0; i < layers.size(); ++i) {
    profile.layers.push_back(layer_profile(*layers[i], *definition, int64_t(i), config, sizes, samples.layers[i],
                                           options.repeats, device, progress));
  }
  const auto scales = calibrate_to_whole_model(profile, samples.whole);
  for (size_t k = 0; k < scales.size(); ++k) {
    profile.description += fmt::format("{} b={} layer times x{:.3f} (whole-model calibration)",
                                       k == 0 ? ";" : ",", sizes[k], scales[k]);
    if (progress) {
      const bool far = scales[k] < 0.67 || scales[k] > 1.5;  // the layers alone ran unlike the chain
      progress(fmt::format("whole model b={}: layer times scaled by {:.3f} to match it{}", sizes[k], scales[k],
                           far ? " (far from 1: a busy machine or launch-bound layers; a quieter machine or "
                                 "more --repeats agrees better)"
                               : ""));
    }
  }
  return profile;
}

}  // namespace pipetrain::profile
