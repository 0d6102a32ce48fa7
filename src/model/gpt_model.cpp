#include "model/gpt_model.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/transformer_work.h"
#include "model/hf_weights.h"
#include "model/registry.h"

namespace pipetrain {

GptConfig gpt_config_from(const ModelConfig& model) {
  GptConfig config;
  config.family = model.kind == "llama" ? DecoderFamily::Llama : DecoderFamily::Gpt2;
  config.vocab_size = model.vocab_size;
  config.d_model = model.d_model;
  config.heads = model.heads;
  config.kv_heads = model.kv_heads;
  config.layers = model.layers;
  config.seq_len = model.seq_len;
  config.positions = model.positions;
  config.ffn_hidden = default_ffn_hidden(model);
  config.norm_eps = model.norm_eps;
  config.gelu_tanh = model.activation == "gelu_tanh";
  config.tied_head = head_is_tied(model);
  config.rope_theta = model.rope_theta;
  config.rope_scaling = parse_rope_scaling(model.rope_scaling, "model.rope_scaling");
  config.precision = model_precision(model);
  config.dtype = config.precision.parameter_dtype();
  config.loss_chunk_tokens = model.loss_chunk_tokens;
  return config;
}

std::string GptModel::kind() const {
  return config_.family == DecoderFamily::Llama ? "llama" : "gpt";
}

std::string GptModel::describe() const {
  if (config_.family == DecoderFamily::Gpt2) {
    return fmt::format("GPT {} layers, d_model {}", config_.layers, config_.d_model);
  }
  return fmt::format("Llama {} layers, d_model {}, {} heads ({} key/value), MLP {}{}",
                     config_.layers, config_.d_model, config_.heads, config_.key_value_heads(),
                     config_.mlp_width(), config_.tied_head ? ", tied head" : "");
}

std::string GptModel::layer_name(int64_t layer) const {
  if (layer == 0) return "embedding";
  if (layer == config_.layer_count() - 1) return "head";
  return fmt::format("block{}", layer - 1);
}

std::shared_ptr<StageModule> GptModel::make_stage(int64_t first, int64_t last) const {
  auto stack = std::make_shared<GptStack>(config_, seed_, first, last);
  if (!initial_weights_.init_from.empty()) load_hf_weights(*stack, initial_weights_, first, last);
  return stack;
}

TensorSpec GptModel::input_spec(int64_t rows) const {
  return {{rows, config_.seq_len}, torch::kInt64};
}

TensorSpec GptModel::boundary_spec(int64_t, int64_t rows) const {
  return {{rows, config_.seq_len, config_.d_model}, config_.precision.activation_dtype()};
}

std::vector<SharedParameter> GptModel::shared_parameters() const {
  if (!config_.tied_head) return {};
  const int64_t head = config_.layer_count() - 1;
  return {{{{0, "layer0.token_weight"}, {head, fmt::format("layer{}.tied_weight", head)}}}};
}

ParameterRole GptModel::role_of(const std::string& parameter, const std::vector<int64_t>&) const {
  return parameter_role(parameter);
}

// Forward FLOPs as plan/analytic.h counts them: a block's matmuls plus scores and mixing
// (4 b s^2 h); the head's logits (2 b s h V); the embedding a lookup.
// Stashed values as libtorch's autograd keeps them (checked against the counting allocator:
// GptLayerMemory.* in tests/runtime): N = rows x seq_len tokens, D wide, H heads, T = seq_len.
// Memory in values of the activation dtype. Mixed precision (measured, GptLayerMemory.bfloat16_*):
// a float32 tensor counts two bfloat16 values (`wide`), and autocast's bfloat16 copy of a
// matrix weight stays with the microbatch for its backward.
LayerWork GptModel::layer_work(int64_t layer, int64_t rows) const {
  if (layer == 0) return embedding_work(rows);
  if (layer == config_.layer_count() - 1) return head_work(rows);
  return config_.family == DecoderFamily::Llama ? llama_block_work(rows) : gpt2_block_work(rows);
}

namespace {

// The embedding's memory-bound passes in activation values (GptLayerTraffic): N tokens of width
// D, a vocabulary of V, T positions; it computes in the parameters' dtype (`wide` activation
// values a value). Forward: the gather reads and writes N D; GPT-2 (`position_rows` > 0) adds
// the T D positions' slice (N D + T D read, N D written); mixed: the output rounded to the
// activation dtype. Backward: mixed: the gradient widened back; the token table's dense gradient
// (the incoming N D and the int64 token ids read, V D written); GPT-2: the positions' gradient
// summed over the batch (N D read, T D written) and written into the table's rows.
struct EmbeddingTraffic {
  double n, d, v, t, position_rows, wide, activation;
  bool mixed;

  double cast() const { return mixed ? (1 + wide) * n * d : 0; }
  double forward() const {
    const double positions = position_rows > 0 ? 2 * n * d + t * d : 0;
    return wide * (2 * n * d + positions) + cast();
  }
  double backward() const {
    const double positions = position_rows > 0 ? n * d + 2 * t * d + position_rows * d : 0;
    return cast() + wide * (n * d + v * d + positions) + 8 / activation * n;
  }
};

}  // namespace

LayerWork GptModel::embedding_work(int64_t rows) const {
  const double n = double(rows) * double(config_.seq_len), h = double(config_.d_model);
  const double v = double(config_.vocab_size);
  const double positions = config_.family == DecoderFamily::Gpt2 ? double(config_.position_rows()) : 0;
  const bool mixed = config_.precision.mixed();
  const double wide = mixed ? 2 : 1;
  LayerWork work;
  work.output_values = n * h;
  work.stashed_values = n * h;  // every layer's output
  work.parameters = v * h + positions * h;
  work.largest_parameter_values = v * h;
  // Backward: the dense (float32) gradients of the token and position weights, and the
  // incoming one (mixed: and its float32 copy).
  work.workspace_values = wide * (v * h + positions * h + n * h) + (mixed ? n * h : 0);
  const EmbeddingTraffic traffic{n, h, v, double(config_.seq_len), positions, wide,
                                 config_.precision.activation_bytes(), mixed};
  work.forward_traffic_values = traffic.forward();
  work.backward_traffic_values = traffic.backward();
  // Operators (counted_work's, GptLayerTraffic): the gather (GPT-2: and the positions' sum;
  // mixed: the cast); backward: the table's gradient (GPT-2: and the positions', summed over
  // the batch and written into the table's rows; mixed: the gradient widened back).
  const double gpt2 = positions > 0 ? 1 : 0, cast = mixed ? 1 : 0;
  work.forward_operators = 1 + gpt2 + cast;
  work.backward_operators = 1 + 2 * gpt2 + cast;
  return work;
}

LayerWork GptModel::gpt2_block_work(int64_t rows) const {
  const double b = double(rows), s = double(config_.seq_len), h = double(config_.d_model);
  const double n = b * s, heads = double(config_.heads), f = double(config_.mlp_width());
  const bool mixed = config_.precision.mixed();
  const double wide = mixed ? 2 : 1;
  LayerWork work;
  work.output_values = n * h;
  work.product_rows = n;
  work.weight_gradient_flops = gpt_block_linear_flops(n, h, f);  // the linears'
  work.forward_flops = work.weight_gradient_flops + attention_flops(n, s, h);
  work.parameters = gpt_block_parameters(h, f);
  work.largest_parameter_values = h * f;  // fc and fc_out
  // Memory-bound passes (the products and the fused attention are FLOPs), in activation values,
  // as counted_work counts them (GptLayerTraffic). Forward: each layer norm reads and writes N D,
  // each residual sum reads 2 N D and writes N D, GELU reads and writes N F. Backward: GELU's
  // reads two N F and writes one, the four biases' gradients read their output gradients (5 N D
  // + N F), each norm reads two N D and writes one, the residual stream's gradients are summed
  // twice (3 N D each), and the q/k/v gradients are stacked into one (6 N D).
  work.forward_traffic_values = 10 * n * h + 2 * n * f;
  work.backward_traffic_values = 23 * n * h + 4 * n * f;
  // Operators (counted_work's, GptLayerTraffic): two layer norms, four linears, attention,
  // GELU, two residual sums; backward: each linear's input and weight gradients and its bias's
  // sum (12), the norms', attention's and GELU's backwards, the q/k/v gradients' stack and the
  // residual stream's two sums; mixed precision widens the eight parameters' gradients.
  work.forward_operators = 10;
  work.backward_operators = mixed ? 27 : 19;
  // ln1 out, q/k/v copies (3), the mixed heads' copy, the residual, ln2 out, fc out (F),
  // gelu out (F), the output: 8 N D + 2 N F; the norms' statistics (4 N); the attention's
  // log-sum-exps, one per head and query (at::scaled_dot_product_attention keeps no [T, T]
  // probabilities).
  // Mixed: the norms' statistics and log-sum-exps are float32, and the matrices' bfloat16
  // copies (4 D^2 + 2 D F; not the biases) stay for the backward.
  work.stashed_values = 8 * n * h + 2 * n * f + wide * (4 * n + b * heads * s) +
                        (mixed ? 4 * h * h + 2 * h * f : 0);
  // Backward peaks in the MLP, at fc_out's addmm backward: its input gradient (N F) and weight
  // gradient (D F) beside the incoming gradient (N D), while its bias gradient is summed (D).
  // The fused attention's backward works in blocks. Mixed: or at its start, when D F outweighs
  // N F, the weight gradient's float32 copy (2 D F). (oneDNN's bfloat16 products on a CPU also
  // take a scratch buffer each, 70-230 KB at the tests' shapes, which is not counted: a GPU's
  // cuBLAS keeps one workspace; GptLayerMemory.*.)
  work.workspace_values =
      (mixed ? std::max(n * h + n * f + h * f, n * h + 2 * h * f) : n * h + n * f + h * f) + h;
  // W: an MLP weight's gradient and a bias's. Mixed: or, with few tokens, the gradient's float32
  // copy (2 D F) once the F-wide recorded gradients are freed (measured).
  work.weight_workspace_values = (mixed ? std::max(h * f, 2 * (h * f - n * f)) : h * f) + h;
  // The W pass: the output gradients of q/k/v (3 D), the projection (D), fc (F) and fc_out (D),
  // one at each linear (its addmm adds the bias), and the two norms' (D each).
  work.weight_pass_values = n * (5 * h + f + 2 * h);
  // B: what it records and its input's gradient.
  work.input_pass_values = work.weight_pass_values + n * h;
  return work;
}

namespace {

// A Llama block's memory-bound passes in activation values (counted_work's, GptLayerTraffic):
// N tokens of width D, key/value width K, MLP width F, T positions of head width hd. Its RMSNorms
// run in `norm` bytes a value (float32 under mixed precision), `activation` bytes elsewhere.
struct LlamaTraffic {
  double n, d, k, f, t, hd, activation, norm;

  bool mixed() const { return norm != activation; }
  double r() const { return norm / activation; }          // a norm value in activation values
  double cast() const { return mixed() ? 1 + r() : 0; }   // a value widened or narrowed
  // pow, mean, x * rsqrt (2 N D each in the norm's dtype but the mean's N D) and the weight's
  // product, which reads the activation dtype and writes the norm's; mixed: the input's cast
  // up and the normalised value's cast down.
  double norm_forward() const { return n * d * (6 * r() + 1 + 2 * cast()); }
  // The rotary tables: computed in float64 (outer product, cat, cos, sin: 52 bytes a table
  // value), copied into the activation dtype (float64 too: `to` with options copies), and each
  // read twice by each rotation (q's and k's).
  double tables() const {
    const double bytes = 52 + 2 * (8 + activation);
    return t * hd * (4 + bytes / activation);
  }
  // Rotary positions on q (N D) and k (N K): the rotated half negated and joined (3 values a
  // value), times cos and sin (2 each) and summed (3); two residual sums (3 N D each); SwiGLU's
  // silu and product (5 N F).
  double forward() const {
    return 2 * norm_forward() + 16 * n * d + 10 * n * k + 5 * n * f + tables();
  }
  // Backward: each norm's 23 passes (in its dtype but one, which reads a low-precision value)
  // and its casts; the gradients summed at the norms' outputs (gate and up: one sum, q, k and
  // v: two; in the norm's dtype, each arriving gradient cast up to it); the residual stream's
  // two sums; the rotations' (14 a value: two products, two slices' backward, a negation, two
  // sums) and their reads of the tables; SwiGLU's (9 N F).
  double backward() const {
    const double norm_backward = n * d * (23 * r() + 1 + 3 * cast());
    const double sums = n * d * (9 * r() + 5 * cast());
    return 2 * norm_backward + sums + 6 * n * d + 14 * n * (d + k) + 9 * n * f + 4 * t * hd;
  }
};

}  // namespace

LayerWork GptModel::llama_block_work(int64_t rows) const {
  const double b = double(rows), s = double(config_.seq_len), h = double(config_.d_model);
  const double n = b * s, heads = double(config_.heads), f = double(config_.mlp_width());
  const double kv = h / heads * double(config_.key_value_heads());  // the key/value width
  const bool mixed = config_.precision.mixed();
  const double wide = mixed ? 2 : 1;
  LayerWork work;
  work.output_values = n * h;
  work.product_rows = n;
  work.weight_gradient_flops = 2 * n * (2 * h * h + 2 * h * kv + 3 * h * f);  // the linears'
  work.forward_flops = work.weight_gradient_flops + attention_flops(n, s, h);
  work.parameters = 2 * h * h + 2 * h * kv + 3 * h * f + 2 * h;
  work.largest_parameter_values = h * f;  // gate, up and down
  // Saved for the backward (measured, GptLayerMemory Llama.*): each RMSNorm its input, its
  // normalised input and its output (the linears' input) and 1/rms; the rotated q and k, v, the
  // attention's output (its merged heads are the same memory) and log-sum-exps; the rotary
  // tables cos and sin [T, hd] (the rotations themselves keep nothing else); the MLP's gate
  // output, silu of it, up's output and their product; the output. The residual stream enters
  // once: the second norm's input is the attention's residual sum.
  const double head_dim = h / heads;
  // Mixed: each RMSNorm keeps a float32 copy of its input, and each linear after a norm its own
  // bfloat16 cast of the norm's float32 output (6 N D more, measured).
  work.stashed_values = 8 * n * h + 2 * n * kv + 4 * n * f + 2 * s * head_dim +
                        wide * (2 * n + b * heads * s) +
                        (mixed ? 6 * n * h + 2 * h * h + 2 * h * kv + 3 * h * f : 0);
  // Backward peaks in the MLP: the gradients of the gate's and up's outputs (2 N F) beside the
  // incoming gradient (N D), or with few tokens in down's backward: its input and weight
  // gradients (N F + D F). Mixed (measured): those gradients once down's bfloat16 weight copy is
  // freed, down's weight gradient as its float32 copy (2 D F), and at least 7 N D in the
  // attention and the norms.
  work.workspace_values = mixed ? std::max({7 * n * h, n * h + 2 * n * f - h * f, n * h + 2 * h * f})
                                : n * h + n * f + std::max(n * f, h * f);
  // The W pass: the output gradients of the two norms' gains (float32 under mixed precision), q,
  // o and down (D each), k and v (the key/value width), gate and up (F each).
  work.weight_pass_values = n * (2 * wide * h + 3 * h + 2 * kv + 2 * f);
  // B: what it records and, at its peak, its input's gradient and the norms' backward (float32
  // under mixed precision): 4 N D, mixed 9 N D (measured).
  work.input_pass_values = work.weight_pass_values + (mixed ? 9 : 4) * n * h;
  // W: an MLP weight's gradient. Mixed: or, with few tokens, its float32 copy once the F-wide
  // recorded gradients are freed (measured).
  work.weight_workspace_values = mixed ? std::max(h * f, 2 * h * f - 4 * n * f) : h * f;
  const double activation = config_.precision.activation_bytes();
  const LlamaTraffic traffic{n, h, kv, f, s, head_dim, activation, mixed ? 4 : activation};
  work.forward_traffic_values = traffic.forward();
  work.backward_traffic_values = traffic.backward();
  // Operators (counted_work's, GptLayerTraffic): two RMSNorms of six (mixed: eight, with their
  // casts), seven linears, the rotary tables (12: recomputed in float64 by each block) and the
  // rotations of q and k (5 each), attention, SwiGLU's silu and product, two residual sums.
  // Backward: the linears' 14 products, each RMSNorm's 15 with the gradient sum beside it, the
  // rotations' 14, attention's, SwiGLU's 3, the sums at the q/k/v and gate/up inputs (3); mixed:
  // 18 casts (the nine weights' gradients widened, the RMSNorms' float32 round trips).
  work.forward_operators = mixed ? 50 : 46;
  work.backward_operators = mixed ? 83 : 65;
  return work;
}

Microbatch GptModel::example(int64_t rows, torch::Generator& generator) const {
  const auto tokens = [&] {
    return torch::randint(0, config_.vocab_size, {rows, config_.seq_len}, generator,
                          torch::kInt64);
  };
  return {tokens(), tokens()};
}

}  // namespace pipetrain
