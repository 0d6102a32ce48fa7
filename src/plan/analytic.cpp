#include "plan/analytic.h"

#include <algorithm>

#include "core/error.h"
#include "core/model_presets.h"
#include "core/text.h"
#include "core/transformer_work.h"

namespace pipetrain::plan {

double GptShape::parameters() const {
  const double h = double(hidden);
  return double(vocab) * h + double(seq_len) * h + double(layers) * gpt_block_parameters(h, 4 * h) + 2 * h;
}

const std::vector<GptShape>& known_gpt_shapes() {
  static const std::vector<GptShape> shapes = [] {
    std::vector<GptShape> all;
    for (const auto& p : model_presets()) {  // GPT-2's sizes, also `model.preset` names
      if (p.kind != "gpt") continue;  // Llama's: `plan --config` with its own per-layer costs
      all.push_back({p.name, p.layers, p.d_model, p.heads, p.seq_len, p.vocab_size});
    }
    const std::vector<GptShape> papers = {
        {"gpt-355m", 24, 1024, 16, 512},  {"gpt-2.2b", 32, 2304, 32, 512},
        {"gpt-3.9b", 32, 3072, 32, 512},  {"gpt3-1b", 24, 2048, 16, 2048},
        {"gpt3-13b", 40, 5120, 40, 2048}, {"gpt3-44b", 96, 6144, 48, 2048},
        {"gpt3-175b", 96, 12288, 96, 2048}};
    all.insert(all.end(), papers.begin(), papers.end());
    return all;
  }();
  return shapes;
}

GptShape find_gpt_shape(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& shape : known_gpt_shapes()) {
    if (shape.name == name) return shape;
    names.push_back(shape.name);
  }
  fail("unknown model '{}' (known: {})", name, join(names, ", "));
}

double block_forward_flops(const GptShape& s, int64_t batch) {
  const double b = double(batch), n = double(s.seq_len), h = double(s.hidden);
  return gpt_block_linear_flops(b * n, h, 4 * h) + attention_flops(b * n, n, h);
}

double head_forward_flops(const GptShape& s, int64_t batch) {
  return 2 * double(batch) * double(s.seq_len) * double(s.hidden) * double(s.vocab);
}

std::vector<LayerCost> analytic_gpt_layers(const GptShape& shape, const ClusterSpec& cluster,
                                           const AnalyticOptions& options) {
  const double flops_per_s = cluster.sustained_flops(double(options.microbatch * shape.seq_len));
  const double value = cluster.bytes_per_value;
  const double optimizer_per_param = value + (value < 4 ? 12.0 : 8.0);  // grads + states
  const double b = double(options.microbatch), n = double(shape.seq_len), h = double(shape.hidden),
               v = double(shape.vocab);
  const double boundary_bytes = value * b * n * h;
  const double block_activations = block_activation_bytes(shape, b, value);

  std::vector<LayerCost> layers;
  LayerCost embedding{"embedding", 0, 0, value * (v * h + n * h), optimizer_per_param * (v * h + n * h),
                      boundary_bytes, boundary_bytes};
  embedding.forward_s = 2 * boundary_bytes / (cluster.intra_node_bandwidth * 8);  // a gather
  embedding.backward_s = 2 * embedding.forward_s;
  embedding.weight_pass_bytes = boundary_bytes;  // its output gradient, for the gather's W
  layers.push_back(embedding);
  const double block_params = gpt_block_parameters(h, 4 * h);
  const double forward = block_forward_flops(shape, options.microbatch) / flops_per_s;
  for (int64_t i = 0; i < shape.layers; ++i) {
    LayerCost block;
    block.name = "block" + std::to_string(i);
    block.forward_s = forward;
    block.backward_s = (options.recompute ? 3 : 2) * forward;
    block.param_bytes = value * block_params;
    block.optimizer_bytes = optimizer_per_param * block_params;
    block.activation_bytes = options.recompute ? boundary_bytes : block_activations;
    block.output_bytes = boundary_bytes;
    // W of the four matmuls needs their output gradients: q, k, v, projection, MLP up (4h) and
    // down (h), 9 h values per token; their inputs are among the activations.
    block.weight_s = gpt_block_linear_flops(b * n, h, 4 * h) / flops_per_s;  // attention has no weights
    block.weight_pass_bytes = 9 * value * b * n * h;
    layers.push_back(block);
  }
  // The head: final norm + logits with the tied weight (its own copy on the last stage), plus
  // the logits and their gradient in fp32 for the softmax.
  LayerCost head;
  head.name = "head";
  head.forward_s = head_forward_flops(shape, options.microbatch) / flops_per_s;
  head.backward_s = 2 * head.forward_s;
  head.param_bytes = value * (v * h + 2 * h);
  head.optimizer_bytes = optimizer_per_param * (v * h + 2 * h);
  head.activation_bytes = options.recompute ? boundary_bytes : head_activation_bytes(shape, b, value);
  head.output_bytes = 0;
  head.weight_s = head.forward_s;  // the logits' gradient it needs is among its activations
  layers.push_back(head);
  return layers;
}

double block_activation_bytes(const GptShape& shape, double microbatch, double bytes_per_value) {
  const double n = double(shape.seq_len), h = double(shape.hidden), a = double(shape.heads);
  return n * microbatch * h * (34 + 5 * a * n / h) * bytes_per_value / 2;
}

double head_activation_bytes(const GptShape& shape, double microbatch, double bytes_per_value) {
  const double tokens = microbatch * double(shape.seq_len);
  return 8 * tokens * double(shape.vocab) + 2 * bytes_per_value * tokens * double(shape.hidden);
}

double recompute_workspace_bytes(const GptShape& shape, const ClusterSpec& cluster,
                                 const AnalyticOptions& options) {
  if (!options.recompute) return 0;
  const double b = double(options.microbatch), n = double(shape.seq_len);
  const double block = block_activation_bytes(shape, b, cluster.bytes_per_value);
  const double head = 8 * b * n * double(shape.vocab);  // fp32 logits and their gradient
  return std::max(block, head);
}

}  // namespace pipetrain::plan
