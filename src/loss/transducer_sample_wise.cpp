// Sample-wise transducer loss: the joint output exists for one sample (or one small group of
// similar-sized samples) at a time; its gradient is written over it in place and pushed through
// the joint at once, so peak memory follows the largest sample, not B * Tmax * Umax.
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/activation.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "loss/joint_network.h"

namespace pipetrain::loss {

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
  const at::Tensor hidden = at::tanh(enc.unsqueeze(2) + pred.unsqueeze(1));  // [G, T, U+1, J]
  std::vector<int64_t> sizes = hidden.sizes().vec();
  sizes.back() = output->weight.size(0);
  return at::_unsafe_view(at::addmm(output->bias, hidden.flatten(0, 2), output->weight.t()), sizes);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Everything the forward needs besides the differentiable tensors.
struct SampleWiseCall {
  const JointFunction* joint;
  at::Tensor targets;
  TransducerLengths lengths;
  SampleWiseOptions options;
  bool want_grad;
};

// Sample order and grouping: largest first, so each group's padding is small and the first
// group (a single sample) tells us V before any budget decision is needed.
std::vector<int64_t> order_by_size(const TransducerLengths& lengths) {
  std::vector<int64_t> order(lengths.logit_lengths.size());
  std::iota(order.begin(), order.end(), 0);
  auto size = [&](int64_t b) { return lengths.logit_lengths[b] * (lengths.target_lengths[b] + 1); };
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return size(a) > size(b); });
  return order;
}

class SampleWiseTransducerFunction
    : public torch::autograd::Function<SampleWiseTransducerFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& enc, const at::Tensor& pred,
                            at::TensorList params, const SampleWiseCall& call) {
    const int64_t B = enc.size(0), J = enc.size(2);
    const auto& len = call.lengths;
    // Each sample's gradient at its own scale (the softmax's, within [-1, 1]), the reduction's 1 / B
    // applied as it is summed: in float16 a gradient pre-divided by B would lose its small values.
    // The sums are float32 at least for the same reason (autograd casts them back to enc's dtype).
    const double grad_scale = call.options.reduction == Reduction::Mean ? 1.0 / B : 1.0;
    const auto wide = at::promote_types(enc.scalar_type(), at::kFloat);
    at::Tensor d_enc, d_pred;
    std::vector<at::Tensor> d_params(params.size());
    std::vector<at::Tensor> grad_inputs;  // params that need a gradient
    std::vector<size_t> grad_param_slot;
    if (call.want_grad) {
      d_enc = at::zeros(enc.sizes(), enc.options().dtype(wide));
      d_pred = at::zeros(pred.sizes(), pred.options().dtype(wide));
      for (size_t k = 0; k < params.size(); ++k) {
        if (params[k].requires_grad()) {
          d_params[k] = at::zeros_like(params[k]);
          grad_inputs.push_back(params[k]);
          grad_param_slot.push_back(k);
        }
      }
    }
    const std::vector<int64_t> order = order_by_size(len);
    // Summed where the samples are, read by whoever reads the loss: no wait for the device a
    // sample (on a GPU the host queues the next sample's kernels while this one runs).
    at::Tensor loss_sum = at::zeros({}, enc.options().dtype(at::kDouble));
    int64_t bytes_per_position = -1;  // known after the first group has shown us V
    const at::Tensor targets = call.targets.to(enc.device(), at::kLong, /*non_blocking=*/true);
    for (size_t first = 0; first < order.size();) {
      // Grow the group while the padded footprint fits the budget.
      int64_t t_max = len.logit_lengths[order[first]], u1_max = len.target_lengths[order[first]] + 1;
      size_t last = first + 1;
      while (last < order.size() && call.options.memory_budget_bytes > 0 && bytes_per_position > 0) {
        const int64_t t = std::max(t_max, len.logit_lengths[order[last]]);
        const int64_t u1 = std::max(u1_max, len.target_lengths[order[last]] + 1);
        const int64_t group = static_cast<int64_t>(last - first + 1);
        if (group * t * u1 * bytes_per_position > call.options.memory_budget_bytes) break;
        t_max = t;
        u1_max = u1;
        ++last;
      }
      const int64_t G = static_cast<int64_t>(last - first);
      // Copied from pageable memory without waiting: CUDA stages it before the call returns.
      const at::Tensor index =
          at::tensor(std::vector<int64_t>(order.begin() + first, order.begin() + last), at::kLong)
              .to(enc.device(), at::kLong, /*non_blocking=*/true);
      at::Tensor enc_g = enc.index_select(0, index).narrow(1, 0, t_max).detach();
      at::Tensor pred_g = pred.index_select(0, index).narrow(1, 0, u1_max).detach();

      at::AutoGradMode grad_mode(call.want_grad);
      if (call.want_grad) {
        enc_g.requires_grad_(true);
        pred_g.requires_grad_(true);
      }
      at::Tensor logits = (*call.joint)(enc_g, pred_g);
      if (logits.dim() != 4 || logits.size(0) != G || logits.size(1) != t_max ||
          logits.size(2) != u1_max) {
        fail("sample-wise transducer loss: joint must return [G, T, U+1, V] = [{}, {}, {}, V]", G,
             t_max, u1_max);
      }
      const int64_t V = logits.size(3);
      if (bytes_per_position < 0) {
        check_transducer_batch(B, enc.size(1), targets.size(1), V, targets,
                               at::tensor(len.logit_lengths), at::tensor(len.target_lengths),
                               call.options.blank);
        // The logits (and their gradient's blocks) in the joint's output dtype; its hidden
        // states (enc + pred, their tanh, and their gradients) in the inputs' dtype, which
        // stays float32 when only the joint computes in bfloat16 (measured on an H200: counting
        // them at the logits' 2 bytes let groups double and the peak grow from 5.73 to 6.35 GB).
        bytes_per_position = static_cast<int64_t>(logits.element_size()) * 2 * V +
                             static_cast<int64_t>(enc.element_size()) * 4 * J;
      }
      const at::Tensor grad = logits.detach();  // same storage: gradient overwrites logits
      for (int64_t g = 0; g < G; ++g) {
        const int64_t b = order[first + g];
        const int64_t T = len.logit_lengths[b], U1 = len.target_lengths[b] + 1;
        at::Tensor sample = grad[g];
        loss_sum.add_(transducer_loss_and_grad_on_device_(
            sample.narrow(0, 0, T).narrow(1, 0, U1), targets[b].narrow(0, 0, U1 - 1),
            call.options.blank, call.want_grad, 1.0));
        if (call.want_grad) {  // padding positions are not part of the loss
          sample.narrow(0, T, t_max - T).zero_();
          sample.narrow(0, 0, T).narrow(1, U1, u1_max - U1).zero_();
        }
      }
      if (call.want_grad) {
        std::vector<at::Tensor> inputs{enc_g, pred_g};
        inputs.insert(inputs.end(), grad_inputs.begin(), grad_inputs.end());
        const variable_list grads =
            torch::autograd::grad({logits}, inputs, {grad}, /*retain_graph=*/false,
                                  /*create_graph=*/false, /*allow_unused=*/true);
        const auto summed = [&](const at::Tensor& g) { return g.to(wide).mul_(grad_scale); };
        if (grads[0].defined()) d_enc.narrow(1, 0, t_max).index_copy_(0, index, summed(grads[0]));
        if (grads[1].defined()) d_pred.narrow(1, 0, u1_max).index_copy_(0, index, summed(grads[1]));
        for (size_t k = 0; k < grad_param_slot.size(); ++k) {
          if (grads[2 + k].defined()) d_params[grad_param_slot[k]].add_(grads[2 + k], grad_scale);
        }
      }
      first = last;
      if (call.options.on_progress) call.options.on_progress(static_cast<int64_t>(first), B);
    }
    if (call.want_grad) {
      ctx->saved_data["d_enc"] = d_enc;
      ctx->saved_data["d_pred"] = d_pred;
      ctx->saved_data["num_params"] = static_cast<int64_t>(d_params.size());
      for (size_t k = 0; k < d_params.size(); ++k) ctx->saved_data["d_param_" + std::to_string(k)] = d_params[k];
    }
    if (call.options.reduction == Reduction::Mean) loss_sum.div_(double(B));
    // float32 at least: a bfloat16 loss (enc's dtype under mixed precision) would keep 3 digits.
    return loss_sum.to(wide);
  }

  // Each kept gradient goes once, to the pass that asks for its input (moved out, so autograd
  // adopts it without a copy): a whole backward takes them all, zero-bubble's split backward
  // enc's and pred's in B and the joint's parameters' in W (runtime::SplitBackward).
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto take = [&](const std::string& key, size_t edge) -> at::Tensor {
      if (!ctx->needs_input_grad(edge)) return {};
      const auto found = ctx->saved_data.find(key);
      if (found == ctx->saved_data.end()) {
        fail("sample-wise transducer loss: backward can run once (its gradients are released)");
      }
      at::Tensor gradient = found->second.toTensor();
      ctx->saved_data.erase(found);
      return gradient;
    };
    variable_list out{take("d_enc", 0), take("d_pred", 1)};
    const int64_t num_params = ctx->saved_data.count("num_params") ? ctx->saved_data["num_params"].toInt() : 0;
    for (int64_t k = 0; k < num_params; ++k) out.push_back(take("d_param_" + std::to_string(k), size_t(2 + k)));
    const at::Tensor& g = grad_outputs[0];
    const bool unit = !g.defined() || g.item<double>() == 1.0;
    if (!unit) {
      for (auto& d : out) {
        if (d.defined()) d.mul_(g);
      }
    }
    out.emplace_back();  // SampleWiseCall: not differentiable
    return out;
  }
};

// enc [B, T, J] and pred [B, U+1, J] fit each other (a joint would fail with a raw c10 error).
void check_joint_inputs(const at::Tensor& enc, const at::Tensor& pred) {
  if (!enc.defined() || enc.dim() != 3) fail("sample-wise transducer loss: enc must be [B, T, J]");
  if (!pred.defined() || pred.dim() != 3) {
    fail("sample-wise transducer loss: pred must be [B, U+1, J]");
  }
  if (pred.size(0) != enc.size(0)) {
    fail("sample-wise transducer loss: enc batch {} != pred batch {}", enc.size(0), pred.size(0));
  }
  if (pred.size(2) != enc.size(2)) {
    fail("sample-wise transducer loss: enc has joint dimension {} but pred has {}", enc.size(2),
         pred.size(2));
  }
  if (pred.scalar_type() != enc.scalar_type()) {
    fail("sample-wise transducer loss: enc is {} but pred is {}", c10::toString(enc.scalar_type()),
         c10::toString(pred.scalar_type()));
  }
}

// vocab_size < 0: not known before the joint runs (a JointFunction); the batch's labels and
// blank are checked against the first joint output instead.
at::Tensor sample_wise_loss(const JointFunction& joint, const std::vector<at::Tensor>& joint_params,
                            const at::Tensor& enc, const at::Tensor& pred,
                            const at::Tensor& targets, const at::Tensor& logit_lengths,
                            const at::Tensor& target_lengths, const SampleWiseOptions& options,
                            int64_t vocab_size) {
  check_joint_inputs(enc, pred);
  if (options.reduction == Reduction::None) {
    fail("sample-wise transducer loss: reduction None is not supported (joint weight gradients "
         "are summed over samples); use Mean or Sum");
  }
  SampleWiseCall call{&joint, targets, {}, options, false};
  call.lengths = check_transducer_batch(enc.size(0), enc.size(1), pred.size(1) - 1, vocab_size,
                                        targets, logit_lengths, target_lengths, options.blank);
  bool any_requires_grad = enc.requires_grad() || pred.requires_grad();
  for (const auto& p : joint_params) any_requires_grad = any_requires_grad || p.requires_grad();
  call.want_grad = at::GradMode::is_enabled() && any_requires_grad;
  return SampleWiseTransducerFunction::apply(enc, pred, at::TensorList(joint_params), call);
}

}  // namespace

at::Tensor sample_wise_transducer_loss(const JointFunction& joint,
                                       const std::vector<at::Tensor>& joint_params,
                                       const at::Tensor& enc, const at::Tensor& pred,
                                       const at::Tensor& targets, const at::Tensor& logit_lengths,
                                       const at::Tensor& target_lengths,
                                       const SampleWiseOptions& options) {
  return sample_wise_loss(joint, joint_params, enc, pred, targets, logit_lengths, target_lengths,
                          options, /*vocab_size=*/-1);
}

at::Tensor sample_wise_transducer_loss(JointNetwork& joint, const at::Tensor& enc,
                                       const at::Tensor& pred, const at::Tensor& targets,
                                       const at::Tensor& logit_lengths,
                                       const at::Tensor& target_lengths,
                                       const SampleWiseOptions& options) {
  check_joint_inputs(enc, pred);
  const auto& linear = joint->output->options;
  if (enc.size(2) != linear.in_features()) {
    fail("sample-wise transducer loss: the joint network takes joint dimension {}, enc and pred "
         "have {}", linear.in_features(), enc.size(2));
  }
  // Under autocast (mixed precision, device/precision.h) the joint casts its own weights.
  const bool autocast = at::autocast::is_autocast_enabled(enc.device().type());
  if (!autocast && joint->output->weight.scalar_type() != enc.scalar_type()) {
    fail("sample-wise transducer loss: enc and pred are {} but the joint network's parameters "
         "are {}", c10::toString(enc.scalar_type()),
         c10::toString(joint->output->weight.scalar_type()));
  }
  JointFunction fn = [&joint](const at::Tensor& e, const at::Tensor& p) {
    return joint->forward(e, p);
  };
  return sample_wise_loss(fn, joint->parameters(), enc, pred, targets, logit_lengths,
                          target_lengths, options, joint->vocab_size());
}

}  // namespace pipetrain::loss
