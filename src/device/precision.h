#pragma once
// What a precision means for tensors (device/execution.h names the kinds). Models build their
// weights in parameter_dtype, run their layers inside a ComputeScope and pass what crosses a
// layer boundary through at_boundary; the engine sends and receives activation_dtype. So one
// rule holds wherever a layer boundary falls: a pipeline stage boundary rounds exactly what the
// single process rounds there, and both runs do the same arithmetic.
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>

#include "device/execution.h"

namespace pipetrain::device {

struct Precision {
  PrecisionKind kind = PrecisionKind::Float32;
  bool mixed() const {
    return kind == PrecisionKind::BFloat16Mixed || kind == PrecisionKind::Float16Mixed;
  }
  // Float16's range: the loss is scaled before the backward (train/loss_scale.h).
  bool scales_loss() const { return kind == PrecisionKind::Float16Mixed; }
  // Weights, gradients, optimizer state, checkpoints, the loss.
  c10::ScalarType parameter_dtype() const;
  // Floating activations between layers (and so between workers).
  c10::ScalarType activation_dtype() const;
  double activation_bytes() const { return double(c10::elementSize(activation_dtype())); }  // a value's
};

Precision precision_of(PrecisionKind kind);

// A floating activation in the activation dtype (a rounding to bfloat16 under mixed precision,
// differentiable: its gradient comes back in the parameters' dtype); other tensors unchanged.
at::Tensor at_boundary(const at::Tensor& activation, const Precision& precision);
// A low-precision tensor widened to float32 (logits before a softmax or a loss); others unchanged.
at::Tensor at_least_float32(const at::Tensor& tensor);

// A norm's weight or bias as ATen's layer_norm takes it beside a low-precision `input`: as it is
// (float32) on the CPU, whose kernel mixes the two; in the input's dtype on a GPU, whose kernel
// takes one dtype. Both kernels keep their statistics in float32 (model/norm.h).
at::Tensor norm_parameter(const at::Tensor& parameter, const at::Tensor& input);

// Mixed precision: autocast on `device` to the low precision for this scope (this thread), as
// torch.autocast does; nests; casts of the weights are cached within the outermost scope only.
// Does nothing for float32 and float64.
class ComputeScope {
 public:
  ComputeScope(const Precision& precision, c10::DeviceType device);
  ~ComputeScope();
  ComputeScope(const ComputeScope&) = delete;
  ComputeScope& operator=(const ComputeScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_ = c10::DeviceType::CPU;
  bool was_enabled_ = false;
  c10::ScalarType previous_dtype_ = c10::ScalarType::Float;
};

// Autocast off on `device` for this scope, inside a ComputeScope: a part that computes in the
// parameters' dtype under mixed precision (the transducer's predictor LSTM, model/transducer.h).
class FullPrecisionScope {
 public:
  explicit FullPrecisionScope(c10::DeviceType device);
  ~FullPrecisionScope();
  FullPrecisionScope(const FullPrecisionScope&) = delete;
  FullPrecisionScope& operator=(const FullPrecisionScope&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
};

}  // namespace pipetrain::device
