// Sample-wise transducer loss: the joint output exists for one sample (or one small group of
// similar-sized samples) at a time; its gradient is written over it in place and pushed through
// the joint at once, so peak memory follows the largest sample, not B * Tmax * Umax.
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "loss/joint_network.h"

namespace pipetrain::loss {
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

// Samples order[first, last) padded to t_max frames and u1_max label positions.
struct SampleGroup {
  size_t first = 0, last = 0;
  int64_t t_max = 0, u1_max = 0;
  int64_t size() const { return static_cast<int64_t>(last - first); }
};

// The group starting at order[first]: grown while its padded footprint fits the budget
// (bytes_per_position <= 0: not known yet, one sample).
SampleGroup next_group(const std::vector<int64_t>& order, size_t first,
                       const TransducerLengths& len, int64_t budget_bytes,
                       int64_t bytes_per_position) {
  SampleGroup group{first, first + 1, len.logit_lengths[order[first]],
                    len.target_lengths[order[first]] + 1};
  while (group.last < order.size() && budget_bytes > 0 && bytes_per_position > 0) {
    const int64_t b = order[group.last];
    const int64_t t = std::max(group.t_max, len.logit_lengths[b]);
    const int64_t u1 = std::max(group.u1_max, len.target_lengths[b] + 1);
    if ((group.size() + 1) * t * u1 * bytes_per_position > budget_bytes) break;
    group.t_max = t;
    group.u1_max = u1;
    ++group.last;
  }
  return group;
}

// The logits (and their gradient's blocks) in the joint's output dtype; its hidden states
// (enc + pred, their tanh, and their gradients) in the inputs' dtype, which stays float32 when
// only the joint computes in bfloat16 (measured on an H200: counting them at the logits' 2
// bytes let groups double and the peak grow from 5.73 to 6.35 GB).
int64_t joint_bytes_per_position(const at::Tensor& logits, const at::Tensor& enc) {
  return static_cast<int64_t>(logits.element_size()) * 2 * logits.size(3) +
         static_cast<int64_t>(enc.element_size()) * 4 * enc.size(2);
}

at::Tensor run_joint(const SampleWiseCall& call, const at::Tensor& enc_g, const at::Tensor& pred_g,
                     const SampleGroup& group) {
  at::Tensor logits = (*call.joint)(enc_g, pred_g);
  if (logits.dim() != 4 || logits.size(0) != group.size() || logits.size(1) != group.t_max ||
      logits.size(2) != group.u1_max) {
    fail("sample-wise transducer loss: joint must return [G, T, U+1, V] = [{}, {}, {}, V]",
         group.size(), group.t_max, group.u1_max);
  }
  return logits;
}

// Each sample's loss, added to loss_sum; with want_grad its gradient replaces its logits in
// grad [G, t_max, u1_max, V] and the padding around it is zeroed (not part of the loss).
void add_group_losses_(at::Tensor& loss_sum, const at::Tensor& grad, const SampleGroup& group,
                       const std::vector<int64_t>& order, const at::Tensor& targets,
                       const SampleWiseCall& call) {
  const auto& len = call.lengths;
  for (int64_t g = 0; g < group.size(); ++g) {
    const int64_t b = order[group.first + g];
    const int64_t T = len.logit_lengths[b], U1 = len.target_lengths[b] + 1;
    at::Tensor sample = grad[g];
    loss_sum.add_(transducer_loss_and_grad_on_device_(
        sample.narrow(0, 0, T).narrow(1, 0, U1), targets[b].narrow(0, 0, U1 - 1),
        call.options.blank, call.want_grad, 1.0));
    if (call.want_grad) {
      sample.narrow(0, T, group.t_max - T).zero_();
      sample.narrow(0, 0, T).narrow(1, U1, group.u1_max - U1).zero_();
    }
  }
}

// The batch's gradients, summed group by group: d(enc), d(pred) and each parameter's that
// needs one. Each sample's gradient at its own scale (the softmax's, within [-1, 1]), the
// reduction's 1 / B applied as it is summed: in float16 a gradient pre-divided by B would lose
// its small values. enc's and pred's sums are float32 at least for the same reason (autograd
// casts them back to enc's dtype).
class GradientSums {
 public:
  GradientSums(const at::Tensor& enc, const at::Tensor& pred, at::TensorList params,
               at::ScalarType wide, double scale)
      : wide_(wide), scale_(scale), d_params_(params.size()) {
    d_enc_ = at::zeros(enc.sizes(), enc.options().dtype(wide));
    d_pred_ = at::zeros(pred.sizes(), pred.options().dtype(wide));
    for (size_t k = 0; k < params.size(); ++k) {
      if (!params[k].requires_grad()) continue;
      d_params_[k] = at::zeros_like(params[k]);
      trained_.push_back(params[k]);
      trained_slot_.push_back(k);
    }
  }

  // Backward through the joint from grad (which overwrote logits) into the sums; index: the
  // group's rows of the batch.
  void add_group(const at::Tensor& logits, const at::Tensor& grad, const at::Tensor& enc_g,
                 const at::Tensor& pred_g, const at::Tensor& index, const SampleGroup& group) {
    std::vector<at::Tensor> inputs{enc_g, pred_g};
    inputs.insert(inputs.end(), trained_.begin(), trained_.end());
    const variable_list grads =
        torch::autograd::grad({logits}, inputs, {grad}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    const auto scaled = [&](const at::Tensor& g) { return g.to(wide_).mul_(scale_); };
    if (grads[0].defined()) d_enc_.narrow(1, 0, group.t_max).index_copy_(0, index, scaled(grads[0]));
    if (grads[1].defined()) d_pred_.narrow(1, 0, group.u1_max).index_copy_(0, index, scaled(grads[1]));
    for (size_t k = 0; k < trained_slot_.size(); ++k) {
      if (grads[2 + k].defined()) d_params_[trained_slot_[k]].add_(grads[2 + k], scale_);
    }
  }

  // Kept for backward, which hands each out once.
  void save(AutogradContext* ctx) const {
    ctx->saved_data["d_enc"] = d_enc_;
    ctx->saved_data["d_pred"] = d_pred_;
    ctx->saved_data["num_params"] = static_cast<int64_t>(d_params_.size());
    for (size_t k = 0; k < d_params_.size(); ++k) {
      ctx->saved_data["d_param_" + std::to_string(k)] = d_params_[k];
    }
  }

 private:
  at::ScalarType wide_;
  double scale_;
  at::Tensor d_enc_, d_pred_;
  std::vector<at::Tensor> d_params_;
  std::vector<at::Tensor> trained_;  // params that need a gradient
  std::vector<size_t> trained_slot_;
};

class SampleWiseTransducerFunction
    : public torch::autograd::Function<SampleWiseTransducerFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& enc, const at::Tensor& pred,
                            at::TensorList params, const SampleWiseCall& call) {
    const int64_t B = enc.size(0);
    const bool mean = call.options.reduction == Reduction::Mean;
    const auto wide = at::promote_types(enc.scalar_type(), at::kFloat);
    std::optional<GradientSums> sums;
    if (call.want_grad) sums.emplace(enc, pred, params, wide, mean ? 1.0 / B : 1.0);
    const std::vector<int64_t> order = order_by_size(call.lengths);
    // Summed where the samples are, read by whoever reads the loss: no wait for the device a
    // sample (on a GPU the host queues the next sample's kernels while this one runs).
    at::Tensor loss_sum = at::zeros({}, enc.options().dtype(at::kDouble));
    int64_t bytes_per_position = -1;  // known after the first group has shown us V
    const at::Tensor targets = call.targets.to(enc.device(), at::kLong, /*non_blocking=*/true);
    for (size_t first = 0; first < order.size();) {
      const SampleGroup group = next_group(order, first, call.lengths,
                                           call.options.memory_budget_bytes, bytes_per_position);
      // Copied from pageable memory without waiting: CUDA stages it before the call returns.
      const at::Tensor index =
          at::tensor(std::vector<int64_t>(order.begin() + group.first, order.begin() + group.last))
              .to(enc.device(), at::kLong, /*non_blocking=*/true);
      at::Tensor enc_g = enc.index_select(0, index).narrow(1, 0, group.t_max).detach();
      at::Tensor pred_g = pred.index_select(0, index).narrow(1, 0, group.u1_max).detach();
      at::AutoGradMode grad_mode(call.want_grad);
      if (call.want_grad) {
        enc_g.requires_grad_(true);
        pred_g.requires_grad_(true);
      }
      const at::Tensor logits = run_joint(call, enc_g, pred_g, group);
      if (bytes_per_position < 0) {
        check_transducer_batch(B, enc.size(1), targets.size(1), logits.size(3), targets,
                               at::tensor(call.lengths.logit_lengths),
                               at::tensor(call.lengths.target_lengths), call.options.blank);
        bytes_per_position = joint_bytes_per_position(logits, enc);
      }
      const at::Tensor grad = logits.detach();  // same storage: gradient overwrites logits
      add_group_losses_(loss_sum, grad, group, order, targets, call);
      if (sums) sums->add_group(logits, grad, enc_g, pred_g, index, group);
      first = group.last;
      if (call.options.on_progress) call.options.on_progress(static_cast<int64_t>(first), B);
    }
    if (sums) sums->save(ctx);
    if (mean) loss_sum.div_(double(B));
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
    // Scaled on the device even by 1 (exact): asking the host whether it is 1 would wait for it.
    const at::Tensor& g = grad_outputs[0];
    if (g.defined()) {
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
