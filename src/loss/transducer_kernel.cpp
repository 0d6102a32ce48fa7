// The fused per-sample transducer loss + gradient ("function merging", REFERENCE.md section 5).
// The only full-size buffer is the caller's logits tensor; every temporary is [T, U+1] or a
// bounded block of rows, so one sample costs T*(U+1)*V elements, not two or three times that.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "loss/transducer.h"
#include "loss/transducer_lattice.h"

namespace pipetrain::loss {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Rows of logits processed per vectorised ATen call. On the CPU about 2^20 elements: the
// temporaries of logsumexp stay cache-sized while each call is large enough to vectorise and
// parallelise. On a GPU every call is a kernel launch (~5 us of host time, where streaming
// 2^20 float32 elements takes ~1.5 us): 2^23 there, 8x fewer launches (13 blocks instead of 100
// an utterance at the paper's shape) for up to 56 MB more of temporaries. The values do not
// depend on it.
int64_t frames_per_block(int64_t labels_plus_one, int64_t vocab, const c10::Device& device) {
  const int64_t elements = int64_t{1} << (device.is_cuda() ? 23 : 20);
  return std::max<int64_t>(1, elements / std::max<int64_t>(1, labels_plus_one * vocab));
}

// A sample's logits [T, U+1, V] cut into blocks of `rows` frames, computed in `wide` (float32
// for bfloat16 and float16 logits, else their own dtype).
struct Blocks {
  int64_t frames, rows;
  at::ScalarType wide;
  at::Tensor of(const at::Tensor& t, int64_t t0) const { return t.narrow(0, t0, std::min(rows, frames - t0)); }
};

// 1. log-softmax denominators [T, U+1], block by block (ATen's logsumexp makes a full-size
//    temporary).
at::Tensor log_softmax_denominators(const at::Tensor& logits, const Blocks& blocks) {
  at::Tensor lse = at::empty({logits.size(0), logits.size(1)}, logits.options().dtype(blocks.wide));
  for (int64_t t0 = 0; t0 < blocks.frames; t0 += blocks.rows) {
    at::Tensor out = blocks.of(lse, t0);
    at::logsumexp_out(out, blocks.of(logits, t0).to(blocks.wide), {2}, false);
  }
  return lse;
}

// 2. The log-probabilities of the two transitions out of every (t, u), in double: blank to
//    (t+1, u), label y_u to (t, u+1) (none after the last label).
struct Transitions {
  int64_t blank = 0;
  at::Tensor blank_lp, emit_lp;  // [T, U+1]
  at::Tensor label_index;        // [T, U, 1]: y_u at every frame (undefined without labels)
};

Transitions transition_log_probs(const at::Tensor& logits, const at::Tensor& lse, const at::Tensor& y_device,
                                 int64_t blank) {
  const int64_t T = logits.size(0), U1 = logits.size(1);
  const at::Tensor lse_double = lse.to(at::kDouble);
  Transitions out;
  out.blank = blank;
  out.blank_lp = (logits.select(2, blank).to(at::kDouble) - lse_double).contiguous();
  out.emit_lp = at::full({T, U1}, kNegInf, lse_double.options());
  if (U1 > 1) {
    out.label_index = y_device.reshape({1, U1 - 1, 1}).expand({T, U1 - 1, 1});
    const at::Tensor label_logits = logits.narrow(1, 0, U1 - 1).gather(2, out.label_index).squeeze(2);
    out.emit_lp.narrow(1, 0, U1 - 1).copy_(label_logits.to(at::kDouble) - lse_double.narrow(1, 0, U1 - 1));
  }
  return out;
}

// 4. d(loss)/dz[t,u,k] = softmax(z)[k] * occupancy(t,u) - (transition terms at blank and y_u),
//    times grad_scale, written over the logits. Uses `alpha` up.
void write_gradient(const at::Tensor& logits, const at::Tensor& lse, const Transitions& moves,
                    at::Tensor& alpha, const at::Tensor& beta, const at::Tensor& loss,
                    double grad_scale, const Blocks& blocks) {
  const int64_t T = logits.size(0), U1 = logits.size(1);
  if (grad_scale == 0.0) {
    logits.zero_();
    return;
  }
  // The first term for all k at once, in place: z <- exp(z - lse + alpha + beta + loss + log s).
  // alpha + beta + loss <= 0 and z - lse <= 0, so exp never overflows.
  const double log_scale = std::log(std::fabs(grad_scale));
  const at::Tensor coef =
      (alpha + beta).add_(loss).add_(log_scale).to(lse.scalar_type()).sub_(lse).unsqueeze(2);
  for (int64_t t0 = 0; t0 < T; t0 += blocks.rows) {
    at::Tensor rows = blocks.of(logits, t0);
    if (blocks.wide == logits.scalar_type()) {
      rows.add_(blocks.of(coef, t0)).exp_();
    } else {
      rows.copy_(rows.to(blocks.wide).add_(blocks.of(coef, t0)).exp_());
    }
  }
  if (grad_scale < 0) logits.neg_();

  // Then subtract the transition terms: blank moves to (t+1, u) (the final blank ends the
  // alignment: beta 0 after (T-1, U)), label y_u moves to (t, u+1).
  const at::Tensor reach = alpha.add_(loss);  // alpha is not needed any more
  at::Tensor after_blank = at::full({T, U1}, kNegInf, alpha.options());
  after_blank.narrow(0, 0, T - 1).copy_(beta.narrow(0, 1, T - 1));
  after_blank[T - 1][U1 - 1] = 0.0;
  const at::Tensor blank_term = (moves.blank_lp + reach).add_(after_blank).exp_().mul_(grad_scale);
  logits.select(2, moves.blank).sub_(blank_term.to(logits.scalar_type()));
  if (U1 > 1) {
    const at::Tensor emit_term = (moves.emit_lp.narrow(1, 0, U1 - 1) + reach.narrow(1, 0, U1 - 1))
                                     .add_(beta.narrow(1, 1, U1 - 1))
                                     .exp_()
                                     .mul_(-grad_scale);
    logits.narrow(1, 0, U1 - 1)
        .scatter_add_(2, moves.label_index, emit_term.unsqueeze(2).to(logits.scalar_type()));
  }
}

// Runs wherever the logits live, CPU or GPU: the V-wide work (log-softmax denominators, the
// gradient written over the logits) is ATen ops on the logits' device, block by block; the
// (T, U+1) lattice (alpha and beta, a sequential recursion of T*U steps) runs there too, in
// double (transducer_lattice: a loop on the host, two thread blocks on a GPU); the loss stays
// there too, as a 0-dim double tensor, so nothing here waits for the device. Low-precision
// logits (bfloat16, float16) are widened to float32 block by block, so the denominators and the
// lattice never round to them; only the gradient written back does.
at::Tensor fused_loss_and_grad(const at::Tensor& logits, const at::Tensor& y_device, int64_t blank,
                               bool want_grad, double grad_scale) {
  const int64_t T = logits.size(0), U1 = logits.size(1), V = logits.size(2);
  const Blocks blocks{T, frames_per_block(U1, V, logits.device()),
                      at::isReducedFloatingType(logits.scalar_type()) ? at::kFloat : logits.scalar_type()};
  const at::Tensor lse = log_softmax_denominators(logits, blocks);
  const Transitions moves = transition_log_probs(logits, lse, y_device, blank);
  // 3. forward (alpha) and backward (beta) variables, in double where the logits are: O(T*U).
  const at::TensorOptions doubles = lse.options().dtype(at::kDouble);
  at::Tensor alpha = at::empty({T, U1}, doubles), beta = at::empty({T, U1}, doubles);
  transducer_lattice(moves.blank_lp, moves.emit_lp, alpha, beta);
  const at::Tensor loss = beta[0][0].neg();
  if (want_grad) write_gradient(logits, lse, moves, alpha, beta, loss, grad_scale, blocks);
  return loss;
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::Device(at::kCPU), at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

void check_integer_tensor(const at::Tensor& tensor, const char* what) {
  if (!at::isIntegralType(tensor.scalar_type(), /*includeBool=*/false)) {
    fail("transducer loss: {} must be an integer tensor, got {}", what,
         c10::toString(tensor.scalar_type()));
  }
}

}  // namespace

void check_transducer_blank(int64_t blank, int64_t vocab_size) {
  if (blank < 0 || blank >= vocab_size) {
    fail("transducer loss: blank {} outside the vocabulary [0, {})", blank, vocab_size);
  }
}

double transducer_loss_and_grad_(const at::Tensor& logits, const at::Tensor& targets,
                                 int64_t blank, bool want_grad, double grad_scale) {
  if (!logits.defined() || logits.dim() != 3) {
    fail("transducer loss: logits must be [T, U+1, V], got {} dimensions",
         logits.defined() ? logits.dim() : 0);
  }
  const int64_t T = logits.size(0), U1 = logits.size(1), V = logits.size(2);
  if (T < 1 || U1 < 1 || V < 1) fail("transducer loss: empty logits [{}, {}, {}]", T, U1, V);
  const auto dtype = logits.scalar_type();
  if (dtype != at::kFloat && dtype != at::kDouble && dtype != at::kBFloat16 && dtype != at::kHalf) {
    fail("transducer loss: logits must be float, double, bfloat16 or half, got {}", c10::toString(dtype));
  }
  if (logits.stride(2) != 1 || logits.stride(1) != V) {
    fail("transducer loss: logits rows must be contiguous (stride(2) == 1, stride(1) == V)");
  }
  if (want_grad && logits.requires_grad()) {
    fail("transducer loss: logits require grad, but the kernel overwrites them with their "
         "gradient in place; pass logits.detach() (or want_grad = false)");
  }
  check_transducer_blank(blank, V);
  if (!targets.defined() || targets.dim() != 1 || targets.numel() != U1 - 1) {
    fail("transducer loss: targets must be [U] = [{}] for logits with U+1 = {}", U1 - 1, U1);
  }
  check_integer_tensor(targets, "targets");
  const std::vector<int64_t> y = to_vector(targets);
  for (int64_t u = 0; u < U1 - 1; ++u) {
    if (y[u] < 0 || y[u] >= V) fail("transducer loss: label {} outside the vocabulary [0, {})", y[u], V);
    if (y[u] == blank) fail("transducer loss: target position {} is the blank symbol {}", u, blank);
  }
  at::NoGradGuard no_grad;  // the kernel computes its own gradient; autograd records nothing
  const at::Tensor y_device = targets.to(logits.device(), at::kLong);
  return fused_loss_and_grad(logits, y_device, blank, want_grad, grad_scale).item<double>();
}

at::Tensor transducer_loss_and_grad_on_device_(const at::Tensor& logits,
                                               const at::Tensor& labels_on_device, int64_t blank,
                                               bool want_grad, double grad_scale) {
  at::NoGradGuard no_grad;
  return fused_loss_and_grad(logits, labels_on_device, blank, want_grad, grad_scale);
}

TransducerLengths check_transducer_batch(int64_t batch, int64_t max_frames, int64_t max_labels,
                                         int64_t vocab_size, const at::Tensor& targets,
                                         const at::Tensor& logit_lengths,
                                         const at::Tensor& target_lengths, int64_t blank) {
  // A mean over no sample is NaN and a sum 0 with nothing learnt: refused under any reduction.
  if (batch < 1) fail("transducer loss: empty batch (B = 0): no sample to take the loss of");
  if (vocab_size >= 0) check_transducer_blank(blank, vocab_size);
  if (!targets.defined() || targets.dim() != 2 || targets.size(0) != batch ||
      targets.size(1) != max_labels) {
    fail("transducer loss: targets must be [B, U] = [{}, {}]", batch, max_labels);
  }
  check_integer_tensor(targets, "targets");
  for (const auto* lengths : {&logit_lengths, &target_lengths}) {
    if (!lengths->defined() || lengths->dim() != 1 || lengths->size(0) != batch) {
      fail("transducer loss: lengths must be [B] = [{}]", batch);
    }
    check_integer_tensor(*lengths, "lengths");
  }
  TransducerLengths out{to_vector(logit_lengths), to_vector(target_lengths)};
  // Read on the host: the labels may live on a GPU.
  const at::Tensor y = targets.to(at::Device(at::kCPU), at::kLong).contiguous();
  const int64_t* yp = y.data_ptr<int64_t>();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t T = out.logit_lengths[b], U = out.target_lengths[b];
    if (T < 1 || T > max_frames) {
      fail("transducer loss: logit length {} of sample {} outside [1, {}]", T, b, max_frames);
    }
    if (U < 0 || U > max_labels) {
      fail("transducer loss: target length {} of sample {} outside [0, {}]", U, b, max_labels);
    }
    for (int64_t u = 0; vocab_size >= 0 && u < U; ++u) {  // unknown vocabulary: checked later
      const int64_t label = yp[b * max_labels + u];
      if (label < 0 || label >= vocab_size) {
        fail("transducer loss: label {} of sample {} outside the vocabulary [0, {})", label, b,
             vocab_size);
      }
      if (label == blank) fail("transducer loss: sample {} has the blank symbol as a target", b);
    }
  }
  return out;
}

}  // namespace pipetrain::loss
