#pragma once
// The lattice of one utterance's transducer loss: alpha (forward) and beta (backward)
// log-variables over (T, U+1), in double, where the tensors live. The recursion is sequential
// along t and u, so it runs as one thread on the host and on a GPU as one thread block each for
// alpha and beta (anti-diagonal by anti-diagonal: every cell of a diagonal depends only on the
// one before), one launch per utterance instead of one copy to the host and back and a wait.
#include <ATen/core/Tensor.h>

namespace pipetrain::loss {

// blank_lp, emit_lp: [T, U+1] double, contiguous, on one device; emit_lp's last column is -inf
// (no label after the last). alpha[t][u]: log-probability of reaching (t, u); beta[t][u]: of
// finishing from (t, u), the final blank included; -beta[0][0] is the loss.
void transducer_lattice(const at::Tensor& blank_lp, const at::Tensor& emit_lp, at::Tensor& alpha,
                        at::Tensor& beta);

}  // namespace pipetrain::loss
