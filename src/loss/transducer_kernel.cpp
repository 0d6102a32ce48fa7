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

// A [T, U+1] double tensor's values on the host (the lattice's inputs and outputs).
std::vector<double> host_values(const at::Tensor& tensor) {
  const at::Tensor host = tensor.to(at::Device(at::kCPU), at::kDouble).contiguous();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

// `values` (host, double) as a tensor like `like` (its device and dtype), shaped `shape`.
at::Tensor device_values(std::vector<double>& values, at::IntArrayRef shape, const at::TensorOptions& like) {
  return at::from_blob(values.data(), shape, at::kDouble).to(like.device(), like.dtype().toScalarType());
}

// Runs wherever the logits live, CPU or GPU: the V-wide work (log-softmax denominators, the
// gradient written over the logits) is ATen ops on the logits' device, block by block; the
// (T, U+1) lattice (alpha and beta, a sequential recursion of T*U steps) runs on the host in
// double, from two [T, U+1] tensors brought over and back: O(T*U) bytes moved against O(T*U*V)
// computed. Low-precision logits (bfloat16, float16) are widened to float32 block by block, so
// the denominators and the lattice never round to them; only the gradient written back does.
double fused_loss_and_grad(const at::Tensor& logits, const at::Tensor& y_device, int64_t blank,
                           bool want_grad, double grad_scale) {
  const int64_t T = logits.size(0), U1 = logits.size(1), V = logits.size(2);
  const int64_t block = frames_per_block(U1, V);
  const at::ScalarType wide =
      at::isReducedFloatingType(logits.scalar_type()) ? at::kFloat : logits.scalar_type();
  const auto block_of = [&](const at::Tensor& t, int64_t t0) {
    return t.narrow(0, t0, std::min(block, T - t0));
  };

  // 1. log-softmax denominators, block by block (ATen's logsumexp makes a full-size temporary).
  at::Tensor lse = at::empty({T, U1}, logits.options().dtype(wide));
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    at::Tensor out = block_of(lse, t0);
    at::logsumexp_out(out, block_of(logits, t0).to(wide), {2}, false);
  }

  // 2. log-probabilities of the two transitions out of every (t, u), in double on the host.
  const at::Tensor lse_double = lse.to(at::kDouble);
  const std::vector<double> blank_lp = host_values(logits.select(2, blank).to(at::kDouble) - lse_double);
  std::vector<double> emit_lp(T * U1, kNegInf);
  at::Tensor label_index;  // [T, U, 1]: y_u at every frame
  if (U1 > 1) {
    label_index = y_device.reshape({1, U1 - 1, 1}).expand({T, U1 - 1, 1});
    const auto emit = host_values(logits.narrow(1, 0, U1 - 1).gather(2, label_index).squeeze(2).to(at::kDouble) -
                                  lse_double.narrow(1, 0, U1 - 1));
    for (int64_t t = 0; t < T; ++t) {
      std::copy_n(emit.begin() + t * (U1 - 1), U1 - 1, emit_lp.begin() + t * U1);
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
  const at::Tensor coef =
      device_values(coef_values, {T, U1}, lse.options()).sub_(lse).unsqueeze(2);
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    at::Tensor rows = block_of(logits, t0);
    if (wide == logits.scalar_type()) {
      rows.add_(block_of(coef, t0)).exp_();
    } else {
      rows.copy_(rows.to(wide).add_(block_of(coef, t0)).exp_());
    }
  }
  if (grad_scale < 0) logits.neg_();

  //    Then subtract the transition terms: blank moves to (t+1, u), label y_u moves to (t, u+1).
  std::vector<double> blank_term(T * U1, 0.0), emit_term(T * (U1 - 1), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t u = 0; u < U1; ++u) {
      const int64_t i = t * U1 + u;
      const double base = alpha[i] + loss;
      double next_blank = kNegInf;
      if (t < T - 1) next_blank = beta[i + U1];
      else if (u == U1 - 1) next_blank = 0.0;  // final blank ends the alignment
      if (next_blank != kNegInf) blank_term[i] = grad_scale * std::exp(blank_lp[i] + base + next_blank);
      if (u < U1 - 1) emit_term[t * (U1 - 1) + u] = -grad_scale * std::exp(emit_lp[i] + base + beta[i + 1]);
    }
  }
  logits.select(2, blank).sub_(device_values(blank_term, {T, U1}, logits.options()));
  if (U1 > 1) {
    logits.narrow(1, 0, U1 - 1)
        .scatter_add_(2, label_index, device_values(emit_term, {T, U1 - 1, 1}, logits.options()));
  }
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
  return fused_loss_and_grad(logits, y_device, blank, want_grad, grad_scale);
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
