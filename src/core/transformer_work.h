#pragma once
// A transformer block's work in closed form, in one place for the planner's analytic model
// (plan/analytic.cpp, plan/terapipe.cpp) and the models' own cost reports (model/gpt_model.cpp).
// A multiply-add counts 2 FLOPs. D: hidden size, F: the MLP's inner width.

namespace pipetrain {

// A GPT-2 block's linears over `tokens` tokens: q, k, v and the projection (4 D^2), the MLP's
// up and down (2 D F). Their weight gradients take as many again.
inline double gpt_block_linear_flops(double tokens, double hidden, double ffn) {
  return 2 * tokens * (4 * hidden * hidden + 2 * hidden * ffn);
}

// Attention's two products (Q K^T and P V) for `tokens` queries against `keys` keys each: a
// causal sequence of s computed whole has s keys per query; TeraPipe's slice of l after a
// context of c, c + l / 2 on average.
inline double attention_flops(double tokens, double keys, double hidden) { return 4 * tokens * keys * hidden; }

// A GPT-2 block's parameters: the linears' weights and biases (4 D^2 + 4 D; 2 D F + F + D) and
// its two LayerNorms' gains and biases (4 D). F = 4 D: 12 D^2 + 13 D.
inline double gpt_block_parameters(double hidden, double ffn) {
  return 4 * hidden * hidden + 2 * hidden * ffn + 9 * hidden + ffn;
}

}  // namespace pipetrain
