// Chunked cross-entropy: forward keeps one log-sum-exp per token; backward recomputes each
// chunk's logits, turns them into the softmax gradient in place, and multiplies straight into
// d(hidden) and d(weight). Peak extra memory: one chunk of logits (plus logsumexp's temporary).
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "device/host_reads.h"
#include "loss/chunked_cross_entropy.h"

namespace pipetrain::loss {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class ChunkedCrossEntropyFunction : public torch::autograd::Function<ChunkedCrossEntropyFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& hidden,
                            const at::Tensor& weight, const at::Tensor& targets,
                            const ChunkedCrossEntropyOptions& options) {
    const int64_t N = hidden.size(0), C = options.chunk_tokens;
    const at::Tensor valid = targets != options.ignore_index;                 // [N] bool
    const at::Tensor safe_targets = targets * valid;  // ignored tokens gather class 0, weight 0
    at::Tensor lse = at::empty({N}, hidden.options());
    // The sum, the count and the divisor stay on the device: no wait for the host, so the loss
    // queues behind the forward and a CUDA graph can capture it (train.cuda_graphs).
    at::Tensor loss_sum = at::zeros({}, hidden.options().dtype(at::kDouble));
    for (int64_t n0 = 0; n0 < N; n0 += C) {
      const int64_t n = std::min(C, N - n0);
      const at::Tensor logits = hidden.narrow(0, n0, n).mm(weight.t());  // [n, V]
      at::Tensor lse_chunk = lse.narrow(0, n0, n);
      at::logsumexp_out(lse_chunk, logits, {1}, false);
      const at::Tensor target_logit =
          logits.gather(1, safe_targets.narrow(0, n0, n).unsqueeze(1)).squeeze(1);
      loss_sum.add_(((lse_chunk - target_logit) * valid.narrow(0, n0, n)).sum(at::kDouble));
    }
    const at::Tensor divisor = options.reduction == Reduction::Mean
                                   ? valid.sum(at::kDouble).clamp_min(1.0)  // 0 tokens: loss 0
                                   : at::ones({}, loss_sum.options());
    ctx->save_for_backward({hidden, weight});
    ctx->saved_data["lse"] = lse;
    ctx->saved_data["targets"] = safe_targets;
    ctx->saved_data["valid"] = valid;
    ctx->saved_data["divisor"] = divisor;
    ctx->saved_data["chunk"] = C;
    return (loss_sum / divisor).to(hidden.scalar_type());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& hidden = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor lse = ctx->saved_data["lse"].toTensor();
    const at::Tensor targets = ctx->saved_data["targets"].toTensor();
    const at::Tensor valid = ctx->saved_data["valid"].toTensor();
    const at::Tensor scale = grad_outputs[0].to(at::kDouble) / ctx->saved_data["divisor"].toTensor();
    const int64_t N = hidden.size(0), C = ctx->saved_data["chunk"].toInt();
    const bool need_hidden = ctx->needs_input_grad(0), need_weight = ctx->needs_input_grad(1);
    at::Tensor d_hidden = need_hidden ? at::empty_like(hidden) : at::Tensor();
    at::Tensor d_weight = need_weight ? at::zeros_like(weight) : at::Tensor();
    for (int64_t n0 = 0; n0 < N; n0 += C) {
      const int64_t n = std::min(C, N - n0);
      const at::Tensor h = hidden.narrow(0, n0, n);
      // d(loss)/d(logits) = (softmax - onehot(target)) * scale, zero for ignored tokens;
      // built in the recomputed logits buffer.
      at::Tensor g = h.mm(weight.t());
      g.sub_(lse.narrow(0, n0, n).unsqueeze(1)).exp_();
      const at::Tensor row_valid = valid.narrow(0, n0, n).unsqueeze(1).to(g.scalar_type());
      g.scatter_add_(1, targets.narrow(0, n0, n).unsqueeze(1), -row_valid);
      g.mul_(row_valid * scale);
      if (need_hidden) {
        at::Tensor out = d_hidden.narrow(0, n0, n);
        at::mm_out(out, g, weight);
      }
      if (need_weight) d_weight.addmm_(g.t(), h);
    }
    return {d_hidden, d_weight, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor chunked_cross_entropy(const at::Tensor& hidden, const at::Tensor& weight,
                                 const at::Tensor& targets,
                                 const ChunkedCrossEntropyOptions& options) {
  if (!hidden.defined() || hidden.dim() != 2) fail("chunked cross-entropy: hidden must be [N, D]");
  if (!weight.defined() || weight.dim() != 2) fail("chunked cross-entropy: weight must be [V, D]");
  if (weight.size(1) != hidden.size(1)) {
    fail("chunked cross-entropy: hidden dim {} != weight dim {}", hidden.size(1), weight.size(1));
  }
  if (!targets.defined() || targets.dim() != 1 || targets.size(0) != hidden.size(0)) {
    fail("chunked cross-entropy: targets must be [N] = [{}]", hidden.size(0));
  }
  if (at::isFloatingType(targets.scalar_type())) fail("chunked cross-entropy: targets must be integers");
  if (options.chunk_tokens < 1) fail("chunked cross-entropy: chunk_tokens must be >= 1");
  if (options.reduction == Reduction::None) fail("chunked cross-entropy: reduction None unsupported");
  const at::Tensor t = targets.to(at::kLong);
  // On the host the targets are checked here, with a clear error; on a device reading them
  // would wait for it (and no CUDA graph could hold the loss): there gather's own bounds check
  // stops a target outside the vocabulary (a device-side assertion).
  if (t.is_cpu()) {
    const device::CpuOnlyRead cpu_only;
    if (((t != options.ignore_index) & ((t < 0) | (t >= weight.size(0)))).any().item<bool>()) {
      fail("chunked cross-entropy: a target is outside the vocabulary [0, {})", weight.size(0));
    }
  }
  return ChunkedCrossEntropyFunction::apply(hidden, weight, t, options);
}

}  // namespace pipetrain::loss
