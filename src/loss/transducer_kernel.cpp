// The fused per-sample transducer loss + gradient ("function merging", REFERENCE.md section 5).
// The only full-size buffer is the caller's logits tensor; every temporary is [T, U+1] or a
// bounded block of rows, so one sample costs T*(U+1)*V elements, not two or three times that.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "loss/transducer.h"

namespace pipetrain::loss {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

inline double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double hi = std::max(a, b);
  return hi + std::log1p(std::exp(-std::fabs(a - b)));
}

// Rows of logits processed per vectorised ATen call: bounds the temporaries of logsumexp to
// about 1M elements while keeping each call large enough to vectorise and parallelise.
int64_t frames_per_block(int64_t labels_plus_one, int64_t vocab) {
  return std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, labels_plus_one * vocab));
}

template <typename scalar_t>
double fused_loss_and_grad(const at::Tensor& logits, const std::vector<int64_t>& y, int64_t blank,
                           bool want_grad, double grad_scale) {
  const int64_t T = logits.size(0), U1 = logits.size(1), V = logits.size(2);
  const int64_t block = frames_per_block(U1, V);

  // 1. log-softmax denominators, block by block (ATen's logsumexp makes a full-size temporary).
  at::Tensor lse = at::empty({T, U1}, logits.options());
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t n = std::min(block, T - t0);
    at::Tensor out = lse.narrow(0, t0, n);
    at::logsumexp_out(out, logits.narrow(0, t0, n), {2}, false);
  }

  // 2. log-probabilities of the two transitions out of every (t, u).
  auto z = logits.accessor<scalar_t, 3>();
  auto lz = lse.accessor<scalar_t, 2>();
  std::vector<double> blank_lp(T * U1), emit_lp(T * U1, kNegInf);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t u = 0; u < U1; ++u) {
      blank_lp[t * U1 + u] = double(z[t][u][blank]) - double(lz[t][u]);
      if (u < U1 - 1) emit_lp[t * U1 + u] = double(z[t][u][y[u]]) - double(lz[t][u]);
    }
  }

  // 3. forward (alpha) and backward (beta) variables, in double: O(T*U), negligible next to V.
  std::vector<double> alpha(T * U1), beta(T * U1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t u = 0; u < U1; ++u) {
      if (t == 0 && u == 0) {
        alpha[0] = 0.0;
        continue;
      }
      double a = kNegInf;
      if (t > 0) a = alpha[(t - 1) * U1 + u] + blank_lp[(t - 1) * U1 + u];
      if (u > 0) a = log_add(a, alpha[t * U1 + u - 1] + emit_lp[t * U1 + u - 1]);
      alpha[t * U1 + u] = a;
    }
  }
  for (int64_t t = T - 1; t >= 0; --t) {
    for (int64_t u = U1 - 1; u >= 0; --u) {
      if (t == T - 1 && u == U1 - 1) {
        beta[t * U1 + u] = blank_lp[t * U1 + u];
        continue;
      }
      double b = kNegInf;
      if (t < T - 1) b = beta[(t + 1) * U1 + u] + blank_lp[t * U1 + u];
      if (u < U1 - 1) b = log_add(b, beta[t * U1 + u + 1] + emit_lp[t * U1 + u]);
      beta[t * U1 + u] = b;
    }
  }
  const double loss = -beta[0];
  if (!want_grad) return loss;

  // 4. d(loss)/dz[t,u,k] = softmax(z)[k] * occupancy(t,u) - (transition terms at blank and y_u).
  //    The first term for all k at once, in place: z <- exp(z - lse + alpha + beta + loss + log s).
  //    alpha + beta + loss <= 0 and z - lse <= 0, so exp never overflows.
  if (grad_scale == 0.0) {
    logits.zero_();
    return loss;
  }
  const double log_scale = std::log(std::fabs(grad_scale));
  std::vector<double> coef_values(T * U1);
  for (int64_t i = 0; i < T * U1; ++i) coef_values[i] = alpha[i] + beta[i] + loss + log_scale;
  at::Tensor coef = at::from_blob(coef_values.data(), {T, U1}, at::kDouble)
                        .to(logits.scalar_type())
                        .sub_(lse)
                        .unsqueeze(2);
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t n = std::min(block, T - t0);
    logits.narrow(0, t0, n).add_(coef.narrow(0, t0, n)).exp_();
  }
  if (grad_scale < 0) logits.neg_();

  //    Then subtract the transition terms: blank moves to (t+1, u), label y_u moves to (t, u+1).
  at::parallel_for(0, T, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      for (int64_t u = 0; u < U1; ++u) {
        const int64_t i = t * U1 + u;
        const double base = alpha[i] + loss;
        double next_blank = kNegInf;
        if (t < T - 1) next_blank = beta[i + U1];
        else if (u == U1 - 1) next_blank = 0.0;  // final blank ends the alignment
        if (next_blank != kNegInf) {
          z[t][u][blank] -= scalar_t(grad_scale * std::exp(blank_lp[i] + base + next_blank));
        }
        if (u < U1 - 1) {
          z[t][u][y[u]] -= scalar_t(grad_scale * std::exp(emit_lp[i] + base + beta[i + 1]));
        }
      }
    }
  });
  return loss;
}

std::vector<int64_t> to_vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous();
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
  if (!logits.device().is_cpu()) fail("transducer loss: the fused kernel runs on CPU tensors");
  if (logits.scalar_type() != at::kFloat && logits.scalar_type() != at::kDouble) {
    fail("transducer loss: logits must be float or double");
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
  if (logits.scalar_type() == at::kDouble) {
    return fused_loss_and_grad<double>(logits, y, blank, want_grad, grad_scale);
  }
  return fused_loss_and_grad<float>(logits, y, blank, want_grad, grad_scale);
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
  const at::Tensor y = targets.to(at::kLong).contiguous();
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
