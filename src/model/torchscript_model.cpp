#include "model/torchscript_model.h"

#include <filesystem>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>

#include "core/error.h"
#include "core/files.h"
#include "device/precision.h"
#include "model/op_work.h"
#include "model/registry.h"

namespace pipetrain {
namespace {

namespace fs = std::filesystem;

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The cause in an error from the TorchScript interpreter, whose first line only says that an
// operation failed: the last "...Error: cause" line of its traceback.
std::string interpreter_error_cause(const std::string& text) {
  std::istringstream lines(text);
  std::string cause = first_line(text);
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("Error: ");
    if (at != std::string::npos) cause = line.substr(at + 7);
  }
  return cause;
}

// What model.json says, and what running an example through the layers found.
struct TorchScriptLayout {
  std::string folder, loss;  // loss: "cross_entropy" or "mse"
  device::Precision precision;  // model.dtype: mixed runs each layer under autocast
  int64_t layers = 0;
  TensorSpec input_row, label_row;          // one row's shape (no rows dimension)
  std::vector<TensorSpec> output_rows;      // each layer's output, one row
  std::vector<double> parameter_counts;     // per layer
  std::vector<double> flops_per_row;        // per layer: its counted forward FLOPs (op_work.h)
  std::vector<double> traffic_per_row;      // per layer: its memory-bound bytes, in activation values
  std::vector<double> operators;            // per layer: the operators its forward calls
};

std::string layer_path(const std::string& folder, int64_t layer) {
  return (fs::path(folder) / fmt::format("layer{}.pt", layer)).string();
}

torch::jit::Module load_torchscript_layer(const std::string& folder, int64_t layer,
                                          torch::ScalarType dtype) {
  const std::string path = layer_path(folder, layer);
  if (!fs::is_regular_file(path)) {
    fail("model.torchscript: {} not found (model.json's \"layers\" counts layer0.pt, layer1.pt, ...)", path);
  }
  try {
    torch::jit::Module module = torch::jit::load(path);
    module.to(dtype);
    return module;
  } catch (const std::exception& error) {
    fail("model.torchscript: {} is not a TorchScript module ({})", path, first_line(error.what()));
  }
}

torch::ScalarType torchscript_dtype(const std::string& name, const std::string& origin) {
  if (name == "float32") return torch::kFloat32;
  if (name == "float64") return torch::kFloat64;
  if (name == "int64") return torch::kInt64;
  fail("{}: dtype must be float32, float64 or int64, got '{}'", origin, name);
}

TensorSpec row_spec(const nlohmann::json& json, const std::string& origin, torch::ScalarType compute) {
  TensorSpec spec;
  spec.shape = json.at("shape").get<std::vector<int64_t>>();
  spec.dtype = torchscript_dtype(json.at("dtype").get<std::string>(), origin);
  if (spec.dtype != torch::kInt64) spec.dtype = compute;  // floating data take model.dtype
  return spec;
}

std::vector<int64_t> with_rows(int64_t rows, const std::vector<int64_t>& row_shape) {
  std::vector<int64_t> shape = {rows};
  shape.insert(shape.end(), row_shape.begin(), row_shape.end());
  return shape;
}

// In float32 at least: a log-softmax or a mean of squares rounded to bfloat16 keeps 3 digits.
torch::Tensor torchscript_loss(const std::string& loss, const torch::Tensor& output,
                               const torch::Tensor& labels) {
  const torch::Tensor wide = device::at_least_float32(output);
  if (loss == "cross_entropy") return torch::nn::functional::cross_entropy(wide, labels);
  return torch::nn::functional::mse_loss(wide, labels);
}

// Random inputs and labels that fit the layout (labels of a cross-entropy: class indices).
Microbatch torchscript_example(const TorchScriptLayout& layout, int64_t rows, torch::Generator& generator) {
  const auto draw = [&](const TensorSpec& row, int64_t classes) {
    const auto shape = with_rows(rows, row.shape);
    if (row.dtype == torch::kInt64) return torch::randint(0, classes, shape, generator, torch::kInt64);
    return torch::randn(shape, generator, torch::kFloat64).to(row.dtype);
  };
  const auto& last = layout.output_rows.empty() ? layout.input_row : layout.output_rows.back();
  const int64_t classes = last.shape.empty() ? 1 : last.shape[0];
  return {draw(layout.input_row, 2), draw(layout.label_row, classes)};
}

// Runs an example of `rows` rows through every layer: each output must be a tensor with the
// rows in dimension 0 that the next layer takes, and the last one the loss takes. Returns each
// layer's output row (its shape without the rows), which must be `same_rows`' where given.
std::vector<TensorSpec> probe_layers(TorchScriptLayout& layout, torch::ScalarType dtype, int64_t rows,
                                     const std::vector<TensorSpec>& same_rows = {}) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(0);
  const Microbatch example = torchscript_example(layout, rows, generator);
  torch::Tensor x = example.inputs;
  std::string from = fmt::format("the input [{}] (model.json)", fmt::join(x.sizes(), ", "));
  std::vector<TensorSpec> output_rows;
  device::ComputeScope scope(layout.precision, x.device().type());  // as the stages run them
  for (int64_t i = 0; i < layout.layers; ++i) {
    auto layer = load_torchscript_layer(layout.folder, i, dtype);
    c10::IValue output;
    try {
      const CountedWork counted = counted_work([&] { output = layer.forward({x}); });
      if (output.isTensor()) output = device::at_boundary(output.toTensor(), layout.precision);
      if (same_rows.empty()) {  // the first probe's: what a layer costs
        double count = 0;
        for (const auto& p : layer.parameters()) count += double(p.numel());
        layout.parameter_counts.push_back(count);
        layout.flops_per_row.push_back(counted.flops / double(rows));
        const double activation = layout.precision.activation_bytes();
        layout.traffic_per_row.push_back(counted.traffic_bytes / activation / double(rows));
        layout.operators.push_back(counted.operators);
      }
    } catch (const std::exception& error) {
      fail("model.torchscript: layer{}.pt does not take {} ({})", i, from,
           interpreter_error_cause(error.what()));
    }
    if (!output.isTensor() || output.toTensor().dim() == 0 || output.toTensor().size(0) != rows) {
      fail("model.torchscript: layer{}.pt must return one tensor with the rows in dimension 0", i);
    }
    x = output.toTensor();
    output_rows.push_back({x.sizes().vec(), x.scalar_type()});
    output_rows.back().shape.erase(output_rows.back().shape.begin());
    if (!same_rows.empty() && same_rows.at(size_t(i)).shape != output_rows.back().shape) {
      fail("model.torchscript: layer{}.pt's output rows depend on how many rows it is given ([{}] "
           "each for {} rows, [{}] each for {}): a row's output must depend on that row alone",
           i, fmt::join(same_rows.at(size_t(i)).shape, ", "), rows - 1,
           fmt::join(output_rows.back().shape, ", "), rows);
    }
    from = fmt::format("layer{}.pt's output [{}]", i, fmt::join(x.sizes(), ", "));
  }
  layout.output_rows = output_rows;
  // Labels drawn now that the last output is known (a class index below its width).
  const torch::Tensor labels = torchscript_example(layout, rows, generator).labels;
  try {
    torchscript_loss(layout.loss, x, labels);
  } catch (const std::exception& error) {
    fail("model.torchscript: the {} loss does not take {} with labels [{}] ({})", layout.loss, from,
         fmt::join(labels.sizes(), ", "), interpreter_error_cause(error.what()));
  }
  return output_rows;
}

// Probes with 2 and with 3 rows: the stages' boundary shapes are a row's shape times the rows, so
// a layer whose rows depend on how many there are is refused here, not met as a wrong size in a
// transfer or a wrong loss later.
void probe_row_shapes(TorchScriptLayout& layout, torch::ScalarType dtype) {
  probe_layers(layout, dtype, 3, probe_layers(layout, dtype, 2));
}

TorchScriptLayout read_torchscript_layout(const Config& config) {
  TorchScriptLayout layout;
  layout.folder = config.model.torchscript;
  if (layout.folder.empty()) {
    fail("model.kind = \"torchscript\" needs model.torchscript: the folder "
         "scripts/export_torchscript.py wrote (docs/models.md)");
  }
  const std::string origin = (fs::path(layout.folder) / "model.json").string();
  if (!fs::is_regular_file(origin)) {
    fail("model.torchscript: {} not found (scripts/export_torchscript.py writes it)", origin);
  }
  layout.precision = model_precision(config.model);
  const torch::ScalarType dtype = layout.precision.parameter_dtype();
  try {
    const auto json = nlohmann::json::parse(read_file(origin));
    layout.layers = json.at("layers").get<int64_t>();
    layout.input_row = row_spec(json.at("input"), origin, dtype);
    layout.label_row = row_spec(json.at("labels"), origin, dtype);
    layout.loss = json.at("loss").get<std::string>();
  } catch (const nlohmann::json::exception& error) {
    fail("{}: {}", origin, first_line(error.what()));
  }
  if (layout.layers < 1) fail("{}: \"layers\" must be at least 1", origin);
  if (layout.loss != "cross_entropy" && layout.loss != "mse") {
    fail("{}: \"loss\" must be cross_entropy or mse, got '{}'", origin, layout.loss);
  }
  probe_row_shapes(layout, dtype);
  return layout;
}

// Registers `tensor` as `name` ("fc1.weight") under `module`, making the child modules on the
// way, so the stage's names follow the TorchScript module's: a parameter, or a buffer (running
// statistics, model state that is not trained: checkpointed, resumed and averaged as the
// engine treats every module's buffers).
enum class Held { Parameter, Buffer };

void register_nested(torch::nn::Module& module, const std::string& name, const torch::Tensor& tensor,
                     Held held) {
  const auto dot = name.find('.');
  if (dot == std::string::npos) {
    if (held == Held::Parameter) {
      module.register_parameter(name, tensor);
    } else {
      module.register_buffer(name, tensor);
    }
    return;
  }
  const std::string child_name = name.substr(0, dot);
  auto children = module.named_children();
  auto* found = children.find(child_name);
  auto child = found != nullptr ? *found
                                : module.register_module(child_name, std::make_shared<torch::nn::Module>());
  register_nested(*child, name.substr(dot + 1), tensor, held);
}

class TorchScriptStage : public StageModule {
 public:
  TorchScriptStage(const TorchScriptLayout& layout, torch::ScalarType dtype, int64_t first, int64_t last)
      : loss_(layout.loss), precision_(layout.precision), first_(first) {
    for (int64_t i = first; i < last; ++i) {
      layers_.push_back(load_torchscript_layer(layout.folder, i, dtype));
      // A layer saved in eval mode (exported after evaluation) trains in train mode: the
      // stage's mode is the engine's to set (train(); eval() for validation), as for any module.
      layers_.back().train(true);
      // The same tensors the TorchScript module reads, so the engine's updates reach it.
      auto holder = register_module(fmt::format("layer{}", i), std::make_shared<torch::nn::Module>());
      for (const auto& p : layers_.back().named_parameters()) register_nested(*holder, p.name, p.value, Held::Parameter);
      for (const auto& b : layers_.back().named_buffers()) register_nested(*holder, b.name, b.value, Held::Buffer);
    }
  }
  // Train/eval mode reaches the TorchScript modules (BatchNorm, dropout), which are not children.
  void train(bool on = true) override {
    torch::nn::Module::train(on);
    for (auto& layer : layers_) layer.train(on);
  }
  // Mixed precision: autocast reaches the ops inside the TorchScript modules (they dispatch as
  // eager ops do), and each layer's output is rounded at its boundary (device/precision.h).
  torch::Tensor forward(const torch::Tensor& input) override {
    device::ComputeScope scope(precision_, input.device().type());
    torch::Tensor x = input;
    for (size_t i = 0; i < layers_.size(); ++i) x = device::at_boundary(run_layer(i, x), precision_);
    return x;
  }
  torch::Tensor loss(const torch::Tensor& output, const torch::Tensor& labels) override {
    return torchscript_loss(loss_, output, labels);
  }

 private:
  // A layer that raises (BatchNorm on a microbatch of one row, a shape it does not take) is one
  // line naming it and the interpreter's cause; one that cuts the graph (returns a detached
  // tensor) is named here, not by the backward that would fail on it.
  torch::Tensor run_layer(size_t i, const torch::Tensor& x) {
    const int64_t layer = first_ + int64_t(i);
    torch::Tensor out;
    try {
      out = layers_[i].forward({x}).toTensor();
    } catch (const std::exception& error) {
      fail("model.torchscript: layer{}.pt failed on a microbatch of {} rows: {}", layer,
           x.dim() > 0 ? x.size(0) : 0, interpreter_error_cause(error.what()));
    }
    bool trained = x.requires_grad();
    for (const auto& p : layers_[i].parameters()) trained = trained || p.requires_grad();
    if (torch::GradMode::is_enabled() && trained && !out.requires_grad()) {
      fail("model.torchscript: layer{}.pt returns a tensor without a gradient (a detach() or "
           "no_grad inside it?): training needs its output to depend on its input and weights", layer);
    }
    return out;
  }

  std::vector<torch::jit::Module> layers_;
  std::string loss_;
  device::Precision precision_;
  int64_t first_;
};

class TorchScriptModel : public Model {
 public:
  TorchScriptModel(TorchScriptLayout layout, torch::ScalarType dtype)
      : layout_(std::move(layout)), dtype_(dtype) {}
  std::string kind() const override { return "torchscript"; }
  std::string describe() const override {
    double parameters = 0;
    for (double count : layout_.parameter_counts) parameters += count;
    return fmt::format("TorchScript layers from {}: {} layers, {:.0f} parameters, {} loss",
                       layout_.folder, layout_.layers, parameters, layout_.loss);
  }
  int64_t layer_count() const override { return layout_.layers; }
  std::string layer_name(int64_t layer) const override { return fmt::format("layer{}", layer); }
  std::shared_ptr<StageModule> make_stage(int64_t first, int64_t last) const override {
    return std::make_shared<TorchScriptStage>(layout_, dtype_, first, last);
  }
  TensorSpec input_spec(int64_t rows) const override {
    return {with_rows(rows, layout_.input_row.shape), layout_.input_row.dtype};
  }
  TensorSpec label_spec(int64_t rows) const override {
    return {with_rows(rows, layout_.label_row.shape), layout_.label_row.dtype};
  }
  // Boundary 0 is the model's input (the engine asks for it on the first stage too).
  TensorSpec boundary_spec(int64_t boundary, int64_t rows) const override {
    if (boundary == 0) return input_spec(rows);
    const TensorSpec& row = layout_.output_rows.at(boundary - 1);
    return {with_rows(rows, row.shape), row.dtype};
  }
  // Not written in a TorchScript file: its convolutions' and matrix products' FLOPs counted in
  // the probe, plus one per output value (what an elementwise layer costs), the bytes its
  // memory-bound operators read and write there, and its operators (the backward's taken as
  // twice the forward's, as its work is).
  LayerWork layer_work(int64_t layer, int64_t rows) const override {
    LayerWork work;
    work.parameters = layout_.parameter_counts.at(layer);
    work.output_values = double(rows);
    for (int64_t size : layout_.output_rows.at(layer).shape) work.output_values *= double(size);
    work.forward_flops = double(rows) * layout_.flops_per_row.at(layer) + work.output_values;
    work.forward_traffic_values = double(rows) * layout_.traffic_per_row.at(layer);
    work.forward_operators = layout_.operators.at(layer);
    work.backward_operators = 2 * work.forward_operators;
    return work;
  }
  Microbatch example(int64_t rows, torch::Generator& generator) const override {
    return torchscript_example(layout_, rows, generator);
  }

 private:
  TorchScriptLayout layout_;
  torch::ScalarType dtype_;
};

}  // namespace

std::shared_ptr<const Model> make_torchscript_model(const Config& config) {
  return std::make_shared<TorchScriptModel>(read_torchscript_layout(config), compute_dtype(config.model));
}

}  // namespace pipetrain
