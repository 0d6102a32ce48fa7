// The transducer's joint network: one tanh over enc + pred, one Linear to the vocabulary.
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ATen.h>

#include "core/error.h"
#include "loss/joint_network.h"

namespace pipetrain::loss {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// tanh(x), keeping only its output for the backward, as at::tanh does. On a CPU libtorch's
// tanh (SLEEF's, within 1 ulp) takes 2.0 ns a value on one core, ten times its sigmoid (0.20
// ns), and it was the transducer's largest single cost: tanh(x) = 2 sigmoid(2x) - 1 makes it
// four passes of about 0.4 ns in all (docs/benchmarks.md, "The transducer's joint on a CPU").
// Its error is absolute, not relative: within 2e-7 in float32 (at::tanh's: 5e-8; 3e-16 in
// float64), far below bfloat16's step of 8e-3 at 1; in bfloat16 or float16 itself the sigmoid's
// rounding would be that large near 0, so those keep at::tanh, as does a GPU, where tanh is
// one memory-bound pass that four would slow.
class JointTanh : public torch::autograd::Function<JointTanh> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x) {
    at::Tensor hidden;
    const bool wide = x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble;
    if (x.device().is_cpu() && wide) {
      hidden = at::empty_like(x);
      at::add_out(hidden, x, x);  // 2x, exactly
      hidden.sigmoid_().mul_(2).sub_(1);
    } else {
      hidden = at::tanh(x);
    }
    ctx->save_for_backward({hidden});
    return hidden;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const at::Tensor hidden = ctx->get_saved_variables()[0];
    return {at::tanh_backward(grad_outputs[0], hidden)};
  }
};

}  // namespace

at::Tensor joint_hidden(const at::Tensor& enc, const at::Tensor& pred) {
  return JointTanh::apply(enc.unsqueeze(2) + pred.unsqueeze(1));
}

JointNetworkImpl::JointNetworkImpl(int64_t joint_dim, int64_t vocab_size) {
  if (joint_dim < 1 || vocab_size < 1) {
    fail("joint network: joint_dim {} and vocab_size {} must be positive", joint_dim, vocab_size);
  }
  output = register_module("output", torch::nn::Linear(joint_dim, vocab_size));
}

// One addmm over the positions with the bias inside, where the C++ frontend's Linear adds the
// bias in a second pass over the logits (model/linear.h). Reshaped by _unsafe_view, as matmul
// does, not by at::linear's view: the loss overwrites the logits with their gradient, and an
// autograd view modified in place would replay itself in the backward (a zero-filled copy of
// all the logits: 16% more memory and 7% more time on a CPU).
at::Tensor JointNetworkImpl::forward(const at::Tensor& enc, const at::Tensor& pred) {
  const at::Tensor hidden = joint_hidden(enc, pred);  // [G, T, U+1, J]
  std::vector<int64_t> sizes = hidden.sizes().vec();
  sizes.back() = output->weight.size(0);
  return at::_unsafe_view(at::addmm(output->bias, hidden.flatten(0, 2), output->weight.t()), sizes);
}

}  // namespace pipetrain::loss
