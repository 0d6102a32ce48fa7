// The GPT head's analytic work (GptModel::head_work): its products, what it keeps for the backward
// and its peaks (GptLayerMemory.*), and its memory-bound passes and operators (GptHeadTraffic.*),
// with full logits (the fused softmax cross-entropy) or chunked cross-entropy.
#include <algorithm>
#include <cmath>

#include "loss/softmax_cross_entropy.h"
#include "model/gpt_model.h"

namespace pipetrain {

namespace {

// The LM head's sizes in values: N tokens of width D over a vocabulary of V.
struct HeadShape {
  double n, h, v;
  bool mixed, llama;
  double wide() const { return mixed ? 2 : 1; }  // values of the activation dtype a float32 takes
};

// Chunked cross-entropy keeps one log-sum-exp per token. Forward: a chunk's logits and
// logsumexp's shifted copy of them; backward: a chunk's logits turned into their gradient, and
// the gradients of the head weight and the hidden states.
void add_chunked_loss_memory(const HeadShape& head, double chunk_tokens, double rms_norm,
                             LayerWork& work) {
  const double n = head.n, h = head.h, v = head.v, wide = head.wide();
  const double chunk = std::min(n, chunk_tokens);
  // Mixed: it runs in float32 on a float32 copy of the hidden states (GptStack::loss).
  work.stashed_values = wide * (n * h + 2 * n + 3.25 * n) + rms_norm;
  work.backward_workspace_values = wide * (chunk * v + v * h + n * h);
  work.workspace_values = std::max(wide * 2 * chunk * v, work.backward_workspace_values);
  // B: the hidden states' gradient beside a chunk's recomputed logits (float32), or the final
  // norm's recorded gradient beside its input's (RMSNorm's backward: 4 N D more, mixed 9,
  // measured). W: the weight's gradient beside a chunk's logits (and two values a token).
  const double norm_backward = head.llama ? (head.mixed ? 9 : 4) * n * h : 0;
  work.input_pass_values = std::max(wide * (n * h + chunk * (v + 2)),
                                    work.weight_pass_values + n * h + norm_backward);
  work.weight_workspace_values = wide * (v * h + chunk * (v + 2));
  work.backward_recompute_flops = work.forward_flops;  // the logits, in B and again in W
  work.backward_recompute_values = wide * n * v;
}

// loss::softmax_cross_entropy keeps the logits (mixed: bfloat16, the padded rows' too, and the
// product keeps the bfloat16 copy of the head weight) and two float32 values a token. Its
// backward writes the logits' gradient (the padded rows', zero in the padding) while a block of
// rows is widened on the host (none on a GPU). Then the product's backward makes the head
// weight's gradient, a temporary beside the accumulated one from the second microbatch on (and
// the hidden states' gradient); mixed: its float32 copy, once the logits, their gradient and the
// weight's bfloat16 copy are gone. With a large vocabulary and a short microbatch that is the
// peak (GPT-2 medium at context 256: 196 MiB). `rows`: the logits' rows (mixed: padded).
void add_full_logits_memory(const HeadShape& head, double rows, double block, LayerWork& work) {
  const double n = head.n, h = head.h, v = head.v, wide = head.wide();
  const bool mixed = head.mixed;
  work.stashed_values += n * rows + 2 * wide * n + (mixed ? rows * h : 0);
  const double weight_gradient = mixed ? 2 * v * h - n * rows : n * h + v * h;
  work.workspace_values = std::max(n * rows + wide * block * v, weight_gradient);
  // B: the logits' gradient (recorded for W) and the widened block; the weight's gradient waits.
  work.input_pass_values = n * rows + wide * block * v;
  // W: the weight's gradient (Llama's: and its norm gain's); mixed: its float32 copy, once the
  // bfloat16 weight copy and N D more are freed (measured).
  work.weight_workspace_values = mixed ? 2 * v * h - n * h : v * h + (head.llama ? h : 0);
}

// The head's memory-bound passes (activation values) and operators, as counted_work counts them
// on a CPU (GptHeadTraffic.*; the O(N) terms, a few values a token, left out). r: the activation
// values a float32 accumulator value takes (mixed: 2). The final norm: LayerNorm 2 N D forward,
// 3 backward; RMSNorm's explicit operators 7 and 24 (mixed, in float32: 19 and 59). Mixed: the
// head weight's gradient widened (3 V D); a vocabulary padded to 64 rows copies the weight into
// the padded bfloat16 one each forward (4 V D as counted: the copy reads its destination too).
// Full logits (loss::softmax_cross_entropy) cross memory once each way on either device: the
// loss reads the N V logits forward, and backward reads them and writes their gradient. A GPU
// does it in one kernel each way; a CPU widens a block of rows at a time (2^20 values, sized to
// stay in its caches) and works on it in place, 7 operators a block forward and 8 backward, and
// checks the targets (5 more): passes over cached blocks, not counted here (the test adds them).
// Chunked cross-entropy runs the same operators on both, in float32 over a chunk's logits (at a
// real vocabulary larger than a cache: 1024 x 50257 floats are 206 MB): r N V (its
// log-sum-exp) forward and 8 r N V backward (the logits recomputed, shifted, exponentiated, the
// targets subtracted, scaled), 7 and 10 operators a chunk, and the weight's float32 gradient
// (r V D); mixed: the norm's output widened and its gradient rounded (3 N D each way; Llama's
// 6 forward); a CPU checks its targets (7 operators).
// The final norm beside the loss: its passes' values per N D and its operators (RMSNorm's are
// explicit ones, under mixed precision in float32 with casts; LayerNorm's one each way).
struct NormWork {
  double forward, backward, forward_operators, backward_operators;
};

NormWork final_norm_work(const HeadShape& head) {
  if (!head.llama) return {2, 3, 0, 0};
  return head.mixed ? NormWork{19, 59, 7, 17} : NormWork{7, 24, 5, 13};
}

void add_chunked_loss_passes(const HeadShape& head, const NormWork& norm, bool float64, int64_t chunk_tokens,
                             LayerWork& work) {
  const double n = head.n, h = head.h, v = head.v, r = head.wide();
  const double chunks = std::ceil(n / double(chunk_tokens));
  const double widened = head.mixed ? (head.llama ? 6 : 3) : 0;  // the norm's output widened
  const double cast = float64 ? -1 : (head.mixed ? 1 : 0);  // the loss's cast back; mixed: the widening
  work.forward_traffic_values = r * n * v + (norm.forward + widened) * n * h;
  work.backward_traffic_values = 8 * r * n * v + (norm.backward + (head.mixed ? 3 : 0)) * n * h + r * v * h;
  work.forward_operators = 15 + 7 * chunks + cast + norm.forward_operators + (head.llama && head.mixed ? 1 : 0);
  work.backward_operators = 5 + 10 * chunks + cast + norm.backward_operators;
  work.on_gpu.forward_operators = work.forward_operators - 7;  // no host check of the targets
}

void add_full_logits_passes(const HeadShape& head, const NormWork& norm, bool padded, int64_t vocab,
                            LayerWork& work) {
  const double n = head.n, h = head.h, v = head.v;
  // A padded vocabulary: the weight's padded copy (zeroed padding, the copy), and RMSNorm's float32
  // output cast for the product (3 N D).
  const bool cast = padded && head.llama;
  work.forward_traffic_values = n * v + (norm.forward + (cast ? 3 : 0)) * n * h + (padded ? 4 * v * h : 0);
  work.backward_traffic_values = 2 * n * v + norm.backward * n * h + (head.mixed ? 3 * v * h : 0);
  const double forward = 7 + norm.forward_operators + (padded ? 2 : 0) + (cast ? 1 : 0);
  const double backward = 6 + (head.mixed ? 1 : 0) + norm.backward_operators;
  const double blocks = std::ceil(n / double(loss::softmax_cross_entropy_block_rows(vocab)));
  work.forward_operators = forward + 5 + 7 * blocks;
  work.backward_operators = backward + 8 * blocks;
  work.on_gpu.forward_operators = forward + 1;
  work.on_gpu.backward_operators = backward + 1;
}

}  // namespace

LayerWork GptModel::head_work(int64_t rows) const {
  const HeadShape head{double(rows) * double(config_.seq_len), double(config_.d_model),
                       double(config_.vocab_size), config_.precision.mixed(),
                       config_.family == DecoderFamily::Llama};
  const double n = head.n, h = head.h, v = head.v, wide = head.wide();
  const bool mixed = head.mixed, llama = head.llama;
  LayerWork work;
  work.forward_flops = work.weight_gradient_flops = 2 * n * h * v;
  work.product_rows = n;
  work.output_values = n * v;  // computed a chunk at a time with chunked cross-entropy: the same work
  work.stashed_values = n * h;
  work.largest_parameter_values = v * h;  // the tied weight, here or on the embedding's stage
  if (config_.tied_head) {
    work.parameters = llama ? h : 2 * h;  // the final norm; the tied weight is the embedding's
    work.shared_values = v * h;
    work.shared_with = 0;
  } else {
    work.parameters = v * h + (llama ? h : 2 * h);
  }
  // LayerNorm keeps its mean and 1/std (float32); RMSNorm (explicit ops) its 1/rms and
  // the normalised input (mixed: a float32 copy of its input and a bfloat16 normalised one).
  const double rms_norm = llama ? wide * n * h + (mixed ? n * h : 0) : 0;
  work.stashed_values += wide * 2 * n + rms_norm;
  // The W pass needs the final norm's output gradient (RMSNorm's explicit ops run in float32
  // under mixed precision) and, with full logits, the logits' (the padded rows' too under mixed
  // precision); chunked cross-entropy's W recomputes its logits a chunk at a time from what the
  // loss keeps (B records only the loss's scalar gradient).
  const double logit_rows = mixed ? double(aligned_head_rows(config_.vocab_size)) : v;
  work.weight_pass_values = (llama ? wide : 1) * n * h;
  const bool padded = mixed && aligned_head_rows(config_.vocab_size) != config_.vocab_size;
  const NormWork norm = final_norm_work(head);
  if (config_.loss_chunk_tokens > 0) {
    add_chunked_loss_passes(head, norm, config_.precision.parameter_dtype() == c10::kDouble,
                            config_.loss_chunk_tokens, work);
  } else {
    add_full_logits_passes(head, norm, padded, config_.vocab_size, work);
  }
  if (config_.loss_chunk_tokens > 0) {
    add_chunked_loss_memory(head, double(config_.loss_chunk_tokens), rms_norm, work);
    work.product_rows = std::min(n, double(config_.loss_chunk_tokens));  // a chunk's logits at a time
  } else {
    work.weight_pass_values += n * logit_rows;
    const double block = std::min(n, double(loss::softmax_cross_entropy_block_rows(config_.vocab_size)));
    add_full_logits_memory(head, logit_rows, block, work);
  }
  return work;
}

}  // namespace pipetrain
