#include "model/op_work.h"

#include <memory>
#include <optional>
#include <string_view>

#include <ATen/record_function.h>

namespace pipetrain {
namespace {

struct Counts {
  CountedWork work;
  int64_t open_operators = 0;  // operators now running on this thread: nested ones are not the host's
};

thread_local Counts counts;

double size_of(const c10::IValue& value, int64_t dim) {
  return value.isTensor() && value.toTensor().dim() > 0 ? double(value.toTensor().size(dim)) : 0.0;
}

// The multiply-adds per output element of a product, read from its inputs; 0 for other operators.
double multiply_adds_per_output(const at::RecordFunction& fn, c10::ArrayRef<const c10::IValue> inputs) {
  const std::string_view name = fn.name();
  if (name == "aten::convolution" && inputs.size() > 1 && inputs[1].isTensor()) {
    const auto& weight = inputs[1].toTensor();  // [out channels, in channels / groups, kernel...]
    return double(weight.numel() / std::max<int64_t>(1, weight.size(0)));
  }
  if ((name == "aten::mm" || name == "aten::bmm") && !inputs.empty()) return size_of(inputs[0], -1);  // [.., n, k] x [.., k, m]
  if ((name == "aten::addmm" || name == "aten::baddbmm") && inputs.size() > 1) return size_of(inputs[1], -1);
  return 0;
}

// Compute-bound operators (and the host-level calls that run products inside them).
bool is_product(std::string_view name) {
  for (const std::string_view part : {"mm", "matmul", "linear", "conv", "attention"}) {
    if (name.find(part) != std::string_view::npos) return true;
  }
  return false;
}

bool ends_with(std::string_view name, std::string_view end) {
  return name.size() >= end.size() && name.substr(name.size() - end.size()) == end;
}

// An embedding, gather or index_select reads the rows it returns (and writes them), not its whole
// table.
bool is_gather(std::string_view name) {
  return name == "aten::embedding" || name == "aten::gather" || name == "aten::index_select";
}

template <typename Visit>
void for_each_tensor(const c10::IValue& value, const Visit& visit) {
  if (value.isTensor()) {
    if (value.toTensor().defined()) visit(value.toTensor());
  } else if (value.isTensorList()) {
    for (const at::Tensor& t : value.toTensorList().vec()) {
      if (t.defined()) visit(t);
    }
  }
}

double bytes_of(const at::Tensor& t) { return double(t.numel()) * double(t.element_size()); }

// What the start callback learns for the end callback (only it sees the inputs).
struct OperatorStart : at::ObserverContext {
  double multiply_adds = 0;
  bool host_called = false;   // not inside another operator, not an allocation
  bool memory_bound = false;  // a memory-bound operator the host called
  bool is_operator = false;   // not the autograd engine's scope around a backward function
  bool gather = false;        // its bytes are its output's, read and written
  bool writes_an_input = false;  // in place or out=: an output aliasing an input is not a view
  double input_bytes = 0;
  std::vector<at::Tensor> inputs;  // to tell a view (its output aliases an input) from a copy
};

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  auto start = std::make_unique<OperatorStart>();
  const auto inputs = fn.inputs();
  start->multiply_adds = multiply_adds_per_output(fn, inputs);
  const std::string_view name = fn.name();
  // The engine's "autograd::engine::evaluate_function: ..." scopes are recorded as functions too.
  start->is_operator = name.rfind("autograd::", 0) != 0;
  // An empty tensor is allocated, not written.
  start->host_called = start->is_operator && counts.open_operators == 0 && name.rfind("aten::empty", 0) != 0;
  start->memory_bound = start->host_called && !is_product(name);
  if (start->is_operator) ++counts.open_operators;
  start->gather = is_gather(name);
  const auto schema = fn.operator_name();
  start->writes_an_input = ends_with(name, "_") ||
                           (schema && schema->overload_name.find("out") != std::string::npos);
  // A ones_like reads nothing of its input.
  if (start->memory_bound && !start->gather && !ends_with(name, "_like")) {
    for (const auto& input : inputs) {
      for_each_tensor(input, [&](const at::Tensor& t) {
        start->input_bytes += bytes_of(t);
        start->inputs.push_back(t);
      });
    }
  }
  return start;
}

// A memory-bound operator's bytes: what it read and what it returned; none for a view (its
// output aliases an input it does not write).
std::optional<double> moved_bytes(const OperatorStart& start, const std::vector<c10::IValue>& outputs) {
  double output_bytes = 0;
  bool view = false;
  for (const auto& output : outputs) {
    for_each_tensor(output, [&](const at::Tensor& t) {
      output_bytes += bytes_of(t);
      for (const auto& input : start.inputs) view = view || (!start.writes_an_input && t.is_alias_of(input));
    });
  }
  if (view) return std::nullopt;
  return start.gather ? 2 * output_bytes : start.input_bytes + output_bytes;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  auto* start = static_cast<OperatorStart*>(context);
  if (start->is_operator) --counts.open_operators;
  const auto& outputs = fn.outputs();
  if (start->multiply_adds > 0 && !outputs.empty() && outputs[0].isTensor()) {
    counts.work.flops += 2 * double(outputs[0].toTensor().numel()) * start->multiply_adds;  // 2 x outputs x MACs
  }
  if (!start->host_called) return;
  const std::optional<double> bytes = start->memory_bound ? moved_bytes(*start, outputs) : 0.0;  // products: 0
  if (!bytes) return;
  counts.work.operators += 1;
  counts.work.traffic_bytes += *bytes;
}

class Counting {
 public:
  Counting()
      : handle_(at::addThreadLocalCallback(at::RecordFunctionCallback(on_start, on_end)
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

CountedWork counted_work(const std::function<void()>& run) {
  counts = {};
  {
    const Counting counting;
    run();
  }
  return counts.work;
}

}  // namespace pipetrain
