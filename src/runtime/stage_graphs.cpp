// train.cuda_graphs on pipeline workers: each chunk's forward and backward of a microbatch, as
// the eager actions run them (stage_executor.cpp), handed to device::PassGraphs to be captured
// once per slot and replayed. The same bits as the eager run: the same operations on the same
// values, the gradients added in the same order (docs/architecture.md, "CUDA graphs").
#include <algorithm>

#include "runtime/stage_executor.h"
#include "train/optim.h"

namespace pipetrain::runtime {
namespace {

// The most microbatches `chunk` holds at once in a step's `actions`: its slots.
int most_in_flight(const std::vector<schedule::Action>& actions, int chunk) {
  int held = 0, most = 0;
  for (const auto& action : actions) {
    if (action.chunk != chunk) continue;
    if (action.kind == schedule::ActionKind::Forward) most = std::max(most, ++held);
    if (action.kind == schedule::ActionKind::Backward) --held;
  }
  return most;
}

}  // namespace

void StageExecutor::zero_gradients() {
  if (zero1_) return zero1_->zero_grad();  // (in place already)
  optimizer_->zero_grad(/*set_to_none=*/pass_graphs_ == nullptr);
}

// What forward_with_graph and backward do for one microbatch, on a slot's tensors: inputs are
// the chunk's input (and on the last stage the labels, and under float16 the loss scale as a
// device scalar, which changes between replays); outputs the tensor its backward starts from
// (and the loss on the last stage); the backward returns the input's gradient.
device::Passes StageExecutor::passes_of(int chunk) const {
  const int stage = layout_.stage_of(chunk);
  const bool first = is_first_stage(stage), last = is_last_stage(stage);
  const bool scaled = loss_scale_.active();
  std::shared_ptr<StageModule> model = chunks_.at(size_t(chunk)).model;
  device::Passes passes;
  // (`this` outlives the passes: they are its pass_graphs_'.)
  passes.forward = [this, model, last, scaled](const std::vector<torch::Tensor>& inputs) {
    torch::Tensor output = model->forward(inputs.at(0));
    if (!last) return std::vector<torch::Tensor>{output};
    const torch::Tensor loss = model->loss(output, inputs.at(1));
    torch::Tensor share = update_share(loss, 1.0);
    if (scaled) share = share * inputs.at(2);  // a power of two: exact, as the eager product
    return std::vector<torch::Tensor>{share, loss.detach().to(torch::kFloat64)};
  };
  passes.backward = [first, last](const std::vector<torch::Tensor>& inputs,
                                  const std::vector<torch::Tensor>& outputs,
                                  const std::vector<torch::Tensor>& grads) {
    const torch::Tensor& root = outputs.at(0);
    torch::autograd::backward({root}, {last ? torch::ones_like(root) : grads.at(0)});
    return first ? std::vector<torch::Tensor>{} : std::vector<torch::Tensor>{inputs.at(0).grad()};
  };
  return passes;
}

void StageExecutor::prepare_pass_graphs(int64_t step,
                                        const std::vector<schedule::Action>& actions) {
  pass_graphs_tried_ = true;
  // The backward adds into every gradient where it is: it must exist before the capture.
  for (const auto& chunk : chunks_) {
    for (auto& param : chunk.model->parameters()) {
      if (!param.grad().defined()) param.mutable_grad() = torch::zeros_like(param);
    }
  }
  const int64_t rows = micro_rows();
  Microbatch micro;  // placeholders of the right shapes: nothing runs at a capture
  if (data_ != nullptr) micro = rows_of(batch_of(list_start(step)), 0, rows);
  const auto zeros = [&](int stage) {
    const TensorSpec spec = activation_spec(stage, rows);
    return torch::zeros(spec.shape, torch::TensorOptions(spec.dtype).device(device_));
  };
  pass_slot_busy_.assign(chunks_.size(), {});
  for (int c = 0; c < layout_.chunks; ++c) {
    const int stage = layout_.stage_of(c);
    std::vector<torch::Tensor> inputs, grads;
    inputs.push_back(is_first_stage(stage) ? micro.inputs : zeros(stage).requires_grad_(true));
    if (is_last_stage(stage)) {
      inputs.push_back(micro.labels);
      if (loss_scale_.active()) inputs.push_back(loss_scale_tensor(1.0));
    } else {
      grads.push_back(zeros(stage + 1));
    }
    const int slots = most_in_flight(actions, c);
    if (!pass_graphs_->prepare(c, slots, inputs, grads, passes_of(c))) return;
    pass_slot_busy_[size_t(c)].assign(size_t(slots), false);
  }
  pass_graphs_ready_ = true;
}

// The loss's dtype (float32 under mixed precision), so the product is the eager one's.
torch::Tensor StageExecutor::loss_scale_tensor(double scale) const {
  return torch::full({}, scale, torch::TensorOptions(torch::kFloat32).device(device_));
}

void StageExecutor::forward_graphed(const Key& key, InFlight& state) {
  const int chunk = std::get<0>(key);
  auto& busy = pass_slot_busy_.at(size_t(chunk));
  const auto free = std::find(busy.begin(), busy.end(), false);
  if (free == busy.end())
    throw std::logic_error("a chunk holds more microbatches than its pass slots");
  *free = true;
  state.slot = int(free - busy.begin());
  std::vector<torch::Tensor> inputs{state.input};
  const bool last = is_last_stage(layout_.stage_of(chunk));
  if (last) inputs.push_back(state.targets);
  if (last && loss_scale_.active()) inputs.push_back(loss_scale_tensor(state.loss_scale));
  const auto outputs = pass_graphs_->forward(chunk, state.slot, inputs);
  if (last) {
    state.loss_value = outputs.at(1);
  } else {
    state.output = outputs.at(0);
  }
}

void StageExecutor::backward_graphed(const Key& key, InFlight& state) {
  const int chunk = std::get<0>(key), stage = layout_.stage_of(chunk);
  std::vector<torch::Tensor> grads;
  if (!is_last_stage(stage)) grads.push_back(state.output_grad);
  const auto results = pass_graphs_->backward(chunk, state.slot, grads);
  pass_slot_busy_.at(size_t(chunk)).at(size_t(state.slot)) = false;
  state.slot = -1;
  state.output = torch::Tensor();
  if (!is_first_stage(stage)) state.input.mutable_grad() = results.at(0);
}

}  // namespace pipetrain::runtime
