// Batched reference transducer loss: plain differentiable ATen ops over the padded batch, so
// autograd provides the gradients. It materialises [B, T, U+1, V] several times over (logits,
// log-softmax, their gradients): the memory problem the sample-wise method removes.
#include <ATen/ATen.h>

#include "core/error.h"
#include "loss/transducer.h"

namespace pipetrain::loss {

at::Tensor transducer_loss_batched(const at::Tensor& logits, const at::Tensor& targets,
                                   const at::Tensor& logit_lengths,
                                   const at::Tensor& target_lengths,
                                   const TransducerOptions& options) {
  if (!logits.defined() || logits.dim() != 4) fail("transducer loss: logits must be [B, T, U+1, V]");
  if (!at::isFloatingType(logits.scalar_type())) fail("transducer loss: logits must be floating");
  const int64_t B = logits.size(0), T = logits.size(1), U1 = logits.size(2), V = logits.size(3);
  if (U1 < 1) fail("transducer loss: logits have U+1 = 0 label positions");
  check_transducer_batch(B, T, U1 - 1, V, targets, logit_lengths, target_lengths, options.blank);
  const auto long_options = logits.options().dtype(at::kLong);
  const at::Tensor t_len = logit_lengths.to(long_options);
  const at::Tensor u_len = target_lengths.to(long_options);

  const at::Tensor log_probs = logits.log_softmax(3);
  const at::Tensor blank_lp = log_probs.select(3, options.blank);  // [B, T, U+1]
  // Padded label positions may hold anything (e.g. -1): replace them by a valid index; they
  // only feed alignments beyond the sample's length, which never reach its loss.
  at::Tensor y = targets.to(long_options);
  const at::Tensor valid = at::arange(U1 - 1, long_options).unsqueeze(0) < u_len.unsqueeze(1);
  y = at::where(valid, y, at::zeros_like(y));
  const at::Tensor emit_lp =  // [B, T, U]
      log_probs.narrow(2, 0, U1 - 1)
          .gather(3, y.view({B, 1, U1 - 1, 1}).expand({B, T, U1 - 1, 1}))
          .squeeze(3);

  // Within frame t, alpha(t, u) = lse(a(u), alpha(t, u-1) + emit(t, u-1)) with a(u) the arrival
  // by blank from frame t-1. Unrolled: alpha(t, u) = E(u) + logcumsumexp(a - E)(u) where E is
  // the exclusive cumulative sum of emit(t, .). One vectorised op per frame instead of U.
  const at::Tensor cum_emit = at::cat(
      {at::zeros({B, T, 1}, logits.options()), emit_lp.cumsum(2)}, 2);  // [B, T, U+1]
  std::vector<at::Tensor> alphas;
  alphas.reserve(T);
  alphas.push_back(cum_emit.select(1, 0));  // frame 0: only emissions from (0, 0)
  for (int64_t t = 1; t < T; ++t) {
    const at::Tensor arrive = alphas.back() + blank_lp.select(1, t - 1);
    const at::Tensor e = cum_emit.select(1, t);
    alphas.push_back(e + at::logcumsumexp(arrive - e, 1));
  }
  const at::Tensor alpha = at::stack(alphas, 1);  // [B, T, U+1]
  const at::Tensor batch_index = at::arange(B, long_options);
  const at::Tensor last_t = t_len - 1;
  const at::Tensor losses = -(alpha.index({batch_index, last_t, u_len}) +
                              blank_lp.index({batch_index, last_t, u_len}));
  switch (options.reduction) {
    case Reduction::Mean: return losses.mean();
    case Reduction::Sum: return losses.sum();
    case Reduction::None: return losses;
  }
  return losses;
}

}  // namespace pipetrain::loss
