#include "device/precision.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

namespace pipetrain::device {

c10::ScalarType Precision::parameter_dtype() const {
  return kind == PrecisionKind::Float64 ? c10::ScalarType::Double : c10::ScalarType::Float;
}

c10::ScalarType Precision::activation_dtype() const {
  switch (kind) {
    case PrecisionKind::Float64: return c10::ScalarType::Double;
    case PrecisionKind::BFloat16Mixed: return c10::ScalarType::BFloat16;
    case PrecisionKind::Float16Mixed: return c10::ScalarType::Half;
    case PrecisionKind::Float32: break;
  }
  return c10::ScalarType::Float;
}

Precision precision_of(PrecisionKind kind) { return Precision{kind}; }

at::Tensor at_boundary(const at::Tensor& activation, const Precision& precision) {
  if (!precision.mixed() || !activation.is_floating_point()) return activation;
  return activation.to(precision.activation_dtype());
}

at::Tensor at_least_float32(const at::Tensor& tensor) {
  const auto dtype = tensor.scalar_type();
  if (dtype == at::kBFloat16 || dtype == at::kHalf) return tensor.to(at::kFloat);
  return tensor;
}

ComputeScope::ComputeScope(const Precision& precision, c10::DeviceType device)
    : active_(precision.mixed()), device_(device) {
  if (!active_) return;
  was_enabled_ = at::autocast::is_autocast_enabled(device_);
  previous_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, precision.activation_dtype());
  at::autocast::increment_nesting();
}

ComputeScope::~ComputeScope() {
  if (!active_) return;
  // The weight casts cached in this scope belong to the weights of this forward: a later one
  // (after an update, or reading another weight version) casts again.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, was_enabled_);
  at::autocast::set_autocast_dtype(device_, previous_dtype_);
}

at::Tensor norm_parameter(const at::Tensor& parameter, const at::Tensor& input) {
  if (!parameter.defined() || input.is_cpu()) return parameter;
  return parameter.to(input.scalar_type());
}

FullPrecisionScope::FullPrecisionScope(c10::DeviceType device)
    : device_(device), was_enabled_(at::autocast::is_autocast_enabled(device)) {
  at::autocast::set_autocast_enabled(device_, false);
}

FullPrecisionScope::~FullPrecisionScope() { at::autocast::set_autocast_enabled(device_, was_enabled_); }

}  // namespace pipetrain::device
