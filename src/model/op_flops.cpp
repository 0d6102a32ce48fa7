#include "model/op_flops.h"

#include <string_view>

#include <ATen/record_function.h>

namespace pipetrain {
namespace {

thread_local double counted = 0;

double size_of(const c10::IValue& value, int64_t dim) {
  return value.isTensor() && value.toTensor().dim() > 0 ? double(value.toTensor().size(dim)) : 0.0;
}

// The multiply-adds per output element, read from the inputs (only the start callback sees them).
struct PerOutput : at::ObserverContext {
  explicit PerOutput(double macs) : multiply_adds(macs) {}
  double multiply_adds;
};

std::unique_ptr<at::ObserverContext> read_inputs(const at::RecordFunction& fn) {
  const auto inputs = fn.inputs();
  const std::string_view name = fn.name();
  double macs = 0;
  if (name == "aten::convolution" && inputs.size() > 1 && inputs[1].isTensor()) {
    const auto& weight = inputs[1].toTensor();  // [out channels, in channels / groups, kernel...]
    macs = double(weight.numel() / std::max<int64_t>(1, weight.size(0)));
  } else if ((name == "aten::mm" || name == "aten::bmm") && !inputs.empty()) {
    macs = size_of(inputs[0], -1);  // [.., n, k] x [.., k, m]
  } else if ((name == "aten::addmm" || name == "aten::baddbmm") && inputs.size() > 1) {
    macs = size_of(inputs[1], -1);
  }
  return macs > 0 ? std::make_unique<PerOutput>(macs) : nullptr;
}

// 2 x (output elements) x (multiply-adds per output element).
void count(const at::RecordFunction& fn, at::ObserverContext* context) {
  const auto* per_output = static_cast<PerOutput*>(context);
  const auto& outputs = fn.outputs();
  if (per_output == nullptr || outputs.empty() || !outputs[0].isTensor()) return;
  counted += 2 * double(outputs[0].toTensor().numel()) * per_output->multiply_adds;
}

class Counting {
 public:
  Counting()
      : handle_(at::addThreadLocalCallback(at::RecordFunctionCallback(read_inputs, count)
                                               .needsInputs(true)
                                               .needsOutputs(true)
                                               .scopes({at::RecordScope::FUNCTION}))) {}
  ~Counting() { at::removeCallback(handle_); }
  Counting(const Counting&) = delete;
  Counting& operator=(const Counting&) = delete;

 private:
  at::CallbackHandle handle_;
};

}  // namespace

double counted_flops(const std::function<void()>& run) {
  counted = 0;
  {
    const Counting counting;
    run();
  }
  return counted;
}

}  // namespace pipetrain
