// train.cuda_graphs on pipeline workers: each chunk's forward and backward of a microbatch, as
// the eager actions run them (stage_executor.cpp), handed to device::PassGraphs to be captured
// once per slot and replayed. The same bits as the eager run: the same operations on the same
// values, the gradients added in the same order (docs/architecture.md, "CUDA graphs").
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "runtime/stage_executor.h"
#include "runtime/split_backward.h"
#include "train/optim.h"

namespace pipetrain::runtime {

void StageExecutor::zero_gradients() {
  if (zero1_) return zero1_->zero_grad();  // (in place already)
  optimizer_->zero_grad(/*set_to_none=*/pass_graphs_ == nullptr);
}

// What forward_with_graph and backward (or backward_input and backward_weight) do for one
// microbatch's token slice (a slot's part), on a slot's tensors: inputs are the chunk's input
// (and on the last stage the labels, and under float16 the loss scale as a device scalar, which
// changes between replays); outputs the tensor its backward starts from (and the loss on the last
// stage); the backward returns the input's gradient (and a split one the weight pass). As the
// eager run does, a recomputed chunk's forward keeps no graph and its backward runs the forward
// again, and token slices keep the slot's K/V cache from its first forward to its last backward.
device::Passes StageExecutor::passes_of(int chunk, bool split) const {
  const int stage = layout_.stage_of(chunk);
  const bool first = is_first_stage(stage), last = is_last_stage(stage);
  const bool scaled = last && loss_scale_.active();  // (the loss scale is the third input)
  const bool recomputed = recompute_.at(size_t(chunk));
  std::shared_ptr<StageModule> model = chunks_.at(size_t(chunk)).model;
  const auto cache = std::make_shared<SequenceKvCache>();  // (this slot's)
  // (`this` outlives the passes: they are its pass_graphs_'.)
  const auto run = [this, model, cache, last, scaled](int part,
                                                      const std::vector<torch::Tensor>& inputs) {
    auto [root, loss] = chunk_forward(
        *model, last, part, inputs.at(0), last ? inputs.at(1) : torch::Tensor(),
        slices_.count() == 1 ? nullptr : cache.get(), scaled ? inputs.at(2) : torch::Tensor());
    return last ? std::vector<torch::Tensor>{root, loss} : std::vector<torch::Tensor>{root};
  };
  device::Passes passes;
  // (A split backward's W reads what its B kept; a token slice, the earlier slices' K/V.)
  passes.independent = recomputed && !split && slices_.count() == 1;
  passes.forward = [run, cache, recomputed](int part, const std::vector<torch::Tensor>& inputs) {
    if (part == 0) *cache = SequenceKvCache();  // (a new sequence)
    std::optional<torch::NoGradGuard> no_graph;
    if (recomputed) no_graph.emplace();
    return run(part, inputs);
  };
  passes.backward = [run, model, cache, recomputed, split, first, last](
                        int part, const std::vector<torch::Tensor>& inputs,
                        const std::vector<torch::Tensor>& outputs,
                        const std::vector<torch::Tensor>& grads) {
    std::vector<torch::Tensor> made = outputs;  // (the loss the host reads is no root)
    if (recomputed) {
      KeepBuffers first_forward_updated_them(*model);
      ReplayedSlice on_its_cache(cache.get(), part);
      made = run(part, inputs);
    }
    const BackwardSeeds seeds = backward_seeds(last, made.at(0), last ? torch::Tensor() : grads.at(0),
                                               cache.get(), part);
    device::Backward backward;
    if (split) {
      auto pass = std::make_shared<SplitBackward>(seeds.roots, seeds.grads, inputs.at(0),
                                                  model->parameters());
      backward.weight_pass = [pass] { pass->weight_pass(); };
    } else {
      torch::autograd::backward(seeds.roots, seeds.grads);
    }
    if (part == 0) *cache = SequenceKvCache();  // (the sequence's last backward)
    if (!first) backward.input_grads = {inputs.at(0).grad()};
    return backward;
  };
  return passes;
}

// No-flush schedules capture with microbatches in flight: those finish eagerly (no slot), on
// the same parameters and gradients, which keep their addresses from here on.
void StageExecutor::prepare_pass_graphs(int64_t step) {
  pass_graphs_tried_ = true;
  for (const auto& chunk : chunks_) {
    chunk.weights->fix_addresses();
    // The backward adds into every gradient where it is: it must exist before the capture.
    for (auto& param : chunk.model->parameters()) {
      if (!param.grad().defined()) param.mutable_grad() = torch::zeros_like(param);
    }
  }
  // The short list starts with nothing in flight and holds the steady steps: its most in flight
  // is the run's (a flush schedule's is the step's).
  const auto& actions = lists_.schedule().actions.at(size_t(layout_.worker()));
  pass_slots_.assign(chunks_.size(), {});
  for (int c = 0; c < layout_.chunks; ++c) {
    const int slots = schedule::most_in_flight(actions, c);
    const bool split = schedule::splits_backward(actions, c);
    if (!pass_graphs_->prepare(c, slots, pass_examples(step, c),
                               [this, c, split] { return passes_of(c, split); }))
      return;
    pass_slots_[size_t(c)] = {std::vector<bool>(size_t(slots), false), split, {}};
  }
  for (int c = 0; c < layout_.chunks; ++c) pass_slots_[size_t(c)].addresses = addresses_of(c);
  pass_graphs_ready_ = true;
}

// Where a chunk's parameters and their gradients lie: what its graphs read and add into.
std::vector<const void*> StageExecutor::addresses_of(int chunk) const {
  std::vector<const void*> addresses;
  for (const auto& param : chunks_.at(size_t(chunk)).model->parameters()) {
    addresses.push_back(param.data_ptr());
    addresses.push_back(param.grad().defined() ? param.grad().data_ptr() : nullptr);
  }
  return addresses;
}

// The captured graphs would read and write the old places: checked at every graphed pass, so
// the emulation (train.cuda_graphs = 2) holds the run to what a capture relies on.
void StageExecutor::check_addresses_kept(int chunk) const {
  if (addresses_of(chunk) == pass_slots_.at(size_t(chunk)).addresses) return;
  throw std::logic_error(fmt::format(
      "train.cuda_graphs: chunk {}'s parameters or gradients moved since its passes were "
      "captured",
      chunk));
}

// Placeholders of a chunk's inputs and gradients, per token slice, of the right shapes.
std::vector<device::PartExample> StageExecutor::pass_examples(int64_t step, int chunk) {
  const int stage = layout_.stage_of(chunk);
  const int64_t rows = micro_rows();
  Microbatch micro;
  if (data_ != nullptr) micro = rows_of(batch_of(list_start(step)), 0, rows);
  const auto zeros = [&](int boundary, int slice) {
    const TensorSpec spec = activation_spec(boundary, rows, slice);
    return torch::zeros(spec.shape, torch::TensorOptions(spec.dtype).device(device_));
  };
  const auto slice_of = [&](const torch::Tensor& whole, int slice) {  // the sequence is dim 1
    if (slices_.count() == 1) return whole;
    return whole.narrow(1, slices_.starts.at(size_t(slice)), slices_.lengths.at(size_t(slice)));
  };
  std::vector<device::PartExample> parts(size_t(slices_.count()));
  for (int slice = 0; slice < slices_.count(); ++slice) {
    auto& [inputs, grads] = parts[size_t(slice)];
    inputs.push_back(is_first_stage(stage) ? slice_of(micro.inputs, slice)
                                           : zeros(stage, slice).requires_grad_(true));
    if (is_last_stage(stage)) {
      inputs.push_back(slice_of(micro.labels, slice));
      if (loss_scale_.active()) inputs.push_back(loss_scale_tensor(1.0));
    } else {
      grads.push_back(zeros(stage + 1, slice));
    }
  }
  return parts;
}

// The loss's dtype (float32 under mixed precision), so the product is the eager one's.
torch::Tensor StageExecutor::loss_scale_tensor(double scale) const {
  return torch::full({}, scale, torch::TensorOptions(torch::kFloat32).device(device_));
}

// A microbatch's first token slice takes the lowest free slot; its later slices use the same.
void StageExecutor::forward_graphed(const Key& key, InFlight& state) {
  const auto [chunk, microbatch, slice] = key;
  if (slice == 0) {
    auto& busy = pass_slots_.at(size_t(chunk)).busy;
    const auto free = std::find(busy.begin(), busy.end(), false);
    if (free == busy.end())
      throw std::logic_error("a chunk holds more microbatches than its pass slots");
    *free = true;
    state.slot = int(free - busy.begin());
  } else {
    state.slot = in_flight_.at({chunk, microbatch, 0}).slot;
  }
  check_addresses_kept(chunk);
  std::vector<torch::Tensor> inputs{state.input};
  const bool last = is_last_stage(layout_.stage_of(chunk));
  if (last) inputs.push_back(state.targets);
  if (last && loss_scale_.active()) inputs.push_back(loss_scale_tensor(state.loss_scale));
  const auto outputs = pass_graphs_->forward(chunk, state.slot, slice, inputs);
  if (last) {
    state.loss_value = outputs.at(1);
  } else {
    state.output = outputs.at(0);
  }
}

// B (`input_only`) leaves the slot to its weight pass; a whole backward of the first token slice
// (the sequence's last) frees it. A chunk whose backwards are split elsewhere in its list
// (DualPipeV's F&B pairs run whole ones) has only the split passes: its whole backward is B, W.
void StageExecutor::backward_graphed(const Key& key, InFlight& state, bool input_only) {
  const auto [chunk, microbatch, slice] = key;
  const int stage = layout_.stage_of(chunk);
  check_addresses_kept(chunk);
  std::vector<torch::Tensor> grads;
  if (!is_last_stage(stage)) grads.push_back(state.output_grad);
  const auto results = pass_graphs_->backward(chunk, state.slot, slice, grads);
  state.output = torch::Tensor();
  if (!is_first_stage(stage)) state.input.mutable_grad() = results.at(0);
  if (input_only) return;
  if (pass_slots_.at(size_t(chunk)).split) return weight_pass_graphed(key, state);
  if (slice == 0) free_pass_slot(chunk, state);
  state.slot = -1;
}

void StageExecutor::weight_pass_graphed(const Key& key, InFlight& state) {
  const int chunk = std::get<0>(key);
  check_addresses_kept(chunk);
  pass_graphs_->weight(chunk, state.slot);
  free_pass_slot(chunk, state);
}

void StageExecutor::free_pass_slot(int chunk, InFlight& state) {
  pass_slots_.at(size_t(chunk)).busy.at(size_t(state.slot)) = false;
  state.slot = -1;
}

}  // namespace pipetrain::runtime
