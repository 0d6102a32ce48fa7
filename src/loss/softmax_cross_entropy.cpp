#include "loss/softmax_cross_entropy.h"

#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ATen.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>

#include "core/error.h"
#include "device/host_reads.h"
#include "loss/softmax_cross_entropy_cuda.h"

namespace pipetrain::loss {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

c10::ScalarType accumulator_of(const at::Tensor& logits) {
  return logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

LogitType logit_type_of(c10::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return LogitType::Float32;
    case at::kDouble: return LogitType::Float64;
    case at::kBFloat16: return LogitType::BFloat16;
    case at::kHalf: return LogitType::Float16;
    default: fail("softmax cross-entropy: logits of dtype {} are not supported", c10::toString(dtype));
  }
}

LogitRows rows_of(const at::Tensor& logits, int64_t classes) {
  LogitRows rows;
  rows.data = logits.const_data_ptr();
  rows.rows = logits.size(0);
  rows.columns = logits.size(1);
  rows.classes = classes;
  rows.row_stride = logits.stride(0);
  rows.type = logit_type_of(logits.scalar_type());
  return rows;
}

void* stream_of(const at::Tensor& tensor) {
  return c10::cuda::getCurrentCUDAStream(tensor.device().index()).stream();
}

// The host path's one transient: a block of logits copied into the accumulator dtype, worked on
// in place (x - top on mixed dtypes would widen x into a temporary first, then write a second).
at::Tensor widened(const at::Tensor& block) {
  return block.to(accumulator_of(block), /*non_blocking=*/false, /*copy=*/true);
}

// Per row, in the accumulator dtype, over its first `classes` columns: its largest logit,
// log sum_j exp(x_j - top), the target's logit. Kept apart (as log_softmax does): x - top is
// exact where it matters, x - lse is not.
struct RowStatistics {
  at::Tensor top, log_sum, picked;  // [N, 1] each
};

RowStatistics row_statistics(const at::Tensor& logits, const at::Tensor& targets,
                             int64_t classes) {
  const int64_t N = logits.size(0);
  const auto options = logits.options().dtype(accumulator_of(logits));
  RowStatistics s{at::empty({N, 1}, options), at::empty({N, 1}, options),
                  at::empty({N, 1}, options)};
  if (logits.is_cuda()) {
    launch_softmax_row_statistics(rows_of(logits, classes), targets.const_data_ptr<int64_t>(),
                                  s.top.data_ptr(), s.log_sum.data_ptr(), s.picked.data_ptr(),
                                  stream_of(logits));
    return s;
  }
  const int64_t block = softmax_cross_entropy_block_rows(classes);
  for (int64_t r0 = 0; r0 < N; r0 += block) {
    const int64_t n = std::min(block, N - r0);
    const at::Tensor x = logits.narrow(0, r0, n).narrow(1, 0, classes);
    at::Tensor top = s.top.narrow(0, r0, n), log_sum = s.log_sum.narrow(0, r0, n);
    top.copy_(x.amax(1, true));  // exact in any dtype
    at::sum_out(log_sum, widened(x).sub_(top).exp_(), {1}, true);
    log_sum.log_();
  }
  s.picked.copy_(logits.gather(1, targets.unsqueeze(1)));
  return s;
}

// (exp(x - top - log_sum) - onehot(target)) * scale in the first `classes` columns and zero in
// the rest, [N, columns] contiguous in the logits' dtype.
at::Tensor softmax_gradient(const at::Tensor& logits, const at::Tensor& targets, int64_t classes,
                            const at::Tensor& top, const at::Tensor& log_sum,
                            const at::Tensor& scale) {
  const int64_t N = logits.size(0), columns = logits.size(1);
  at::Tensor grad =
      at::empty({N, columns}, logits.options().memory_format(at::MemoryFormat::Contiguous));
  if (logits.is_cuda()) {
    launch_softmax_cross_entropy_gradient(
        rows_of(logits, classes), targets.const_data_ptr<int64_t>(), top.const_data_ptr(),
        log_sum.const_data_ptr(), scale.const_data_ptr(), grad.data_ptr(), stream_of(logits));
    return grad;
  }
  const int64_t block = softmax_cross_entropy_block_rows(classes);
  for (int64_t r0 = 0; r0 < N; r0 += block) {
    const int64_t n = std::min(block, N - r0);
    at::Tensor g = widened(logits.narrow(0, r0, n).narrow(1, 0, classes))
                       .sub_(top.narrow(0, r0, n))
                       .sub_(log_sum.narrow(0, r0, n))
                       .exp_();
    g.scatter_add_(1, targets.narrow(0, r0, n).unsqueeze(1), at::full({n, 1}, -1.0, g.options()));
    grad.narrow(0, r0, n).narrow(1, 0, classes).copy_(g.mul_(scale));
  }
  grad.narrow(1, classes, columns - classes).zero_();
  return grad;
}

class SoftmaxCrossEntropyFunction : public torch::autograd::Function<SoftmaxCrossEntropyFunction> {
 public:
  // logits [N, columns]: the first `classes` columns are the logits, the rest padding.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, int64_t classes) {
    const RowStatistics s = row_statistics(logits, targets, classes);
    ctx->save_for_backward({logits, targets});
    ctx->saved_data["classes"] = classes;
    ctx->saved_data["top"] = s.top;
    ctx->saved_data["log_sum"] = s.log_sum;
    return ((s.top - s.picked) + s.log_sum).mean();
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& logits = saved[0];
    const at::Tensor top = ctx->saved_data["top"].toTensor();
    const at::Tensor log_sum = ctx->saved_data["log_sum"].toTensor();
    // On the device: the upstream gradient is never read on the host (CUDA graphs capture this).
    const at::Tensor scale =
        grad_outputs[0].to(top.scalar_type()) / double(std::max<int64_t>(logits.size(0), 1));
    const int64_t classes = ctx->saved_data["classes"].toInt();
    return {softmax_gradient(logits, saved[1], classes, top, log_sum, scale), at::Tensor(),
            at::Tensor()};
  }
};

// The rows that `logits` [N, V] is the leading V columns of, when autograd knows them as its base
// (mixed precision's GPT head: a product over a vocabulary padded to 64 columns, cut back). The
// loss then reads and differentiates those rows, the padding ignored: its backward writes the
// padded gradient at once, zero in the padding, where autograd's narrow backward would zero-fill
// a padded buffer and copy the gradient into it (6 bytes a bfloat16 logit more traffic).
// Undefined otherwise: the view itself is read.
at::Tensor padded_rows_of(const at::Tensor& logits) {
  if (!logits.is_view() || logits.stride(1) != 1) return {};
  const at::Tensor base(logits._base());
  const int64_t rows = logits.size(0), width = logits.stride(0);
  const bool leading_columns = base.is_contiguous() && base.scalar_type() == logits.scalar_type() &&
                               base.storage_offset() == logits.storage_offset() &&
                               width > logits.size(1) && base.numel() == rows * width;
  if (rows == 0 || !leading_columns || base.requires_grad() != logits.requires_grad()) return {};
  return base.view({rows, width});
}

}  // namespace

int64_t softmax_cross_entropy_block_rows(int64_t vocab) {
  return std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(vocab, 1));
}

at::Tensor softmax_cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  if (!logits.defined() || logits.dim() != 2 || !logits.is_floating_point()) {
    fail("softmax cross-entropy: logits must be a floating [N, V] tensor");
  }
  if (!targets.defined() || targets.dim() != 1 || targets.size(0) != logits.size(0)) {
    fail("softmax cross-entropy: targets must be [N] = [{}]", logits.size(0));
  }
  if (at::isFloatingType(targets.scalar_type())) {
    fail("softmax cross-entropy: targets must be integers");
  }
  if (targets.device() != logits.device()) {
    fail("softmax cross-entropy: targets on {}, logits on {}", targets.device().str(),
         logits.device().str());
  }
  const at::Tensor t = targets.to(at::kLong).contiguous();
  if (!logits.is_cuda() && t.numel() > 0) {
    const device::CpuOnlyRead cpu_only;  // on a GPU the kernel makes a bad target's loss NaN
    const int64_t V = logits.size(1);
    if (((t < 0) | (t >= V)).any().item<bool>()) {
      fail("softmax cross-entropy: a target is outside [0, {})", V);
    }
  }
  const at::Tensor padded = padded_rows_of(logits);
  if (padded.defined()) return SoftmaxCrossEntropyFunction::apply(padded, t, logits.size(1));
  // The kernels read rows of adjacent values; a view whose columns are strided is copied once.
  const at::Tensor rows = logits.stride(1) == 1 ? logits : logits.contiguous();
  return SoftmaxCrossEntropyFunction::apply(rows, t, logits.size(1));
}

}  // namespace pipetrain::loss
