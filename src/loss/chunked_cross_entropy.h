#pragma once
// Cross-entropy for a language-model head whose logits are never materialised in full:
// logits = hidden @ weight^T are computed (and recomputed in backward) a chunk of tokens at a
// time, so the head needs O(chunk * V) memory instead of O(N * V) (several times over).
#include <cstdint>

#include <ATen/core/Tensor.h>

#include "loss/transducer.h"  // Reduction

namespace pipetrain::loss {

struct ChunkedCrossEntropyOptions {
  int64_t chunk_tokens = 1024;           // tokens per chunk: memory ~ chunk_tokens * V * 4 B
  int64_t ignore_index = -100;           // targets equal to this contribute nothing
  Reduction reduction = Reduction::Mean; // Mean over non-ignored tokens (0 if none), or Sum
};

// hidden [N, D] (final hidden states), weight [V, D] (LM head, e.g. the tied embedding),
// targets [N] integer. Returns the scalar loss; differentiable w.r.t. hidden and weight.
// Saves only hidden, weight, targets and one log-sum-exp per token for backward.
at::Tensor chunked_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                 const at::Tensor& targets,
                                 const ChunkedCrossEntropyOptions& options = {});

}  // namespace pipetrain::loss
