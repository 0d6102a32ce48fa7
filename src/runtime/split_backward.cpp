#include "runtime/split_backward.h"

#include <map>
#include <optional>
#include <set>
#include <stdexcept>

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace pipetrain::runtime {

using torch::autograd::Edge;
using torch::autograd::Node;
using torch::autograd::variable_list;

namespace {

// Keeps the gradients a junction receives during B (its first run); W reads them.
struct RecordArrivingGradients : torch::autograd::FunctionPreHook {
  explicit RecordArrivingGradients(std::shared_ptr<variable_list> into) : into(std::move(into)) {}
  variable_list operator()(const variable_list& grads) override {
    if (into->empty()) *into = grads;
    return grads;
  }
  std::shared_ptr<variable_list> into;
};

// The graph below the roots: which nodes reach the input, which weights each other node reaches.
class GraphWalk {
 public:
  GraphWalk(const torch::Tensor& input, const std::vector<torch::Tensor>& params) {
    if (input.defined() && input.requires_grad()) {
      input_ = torch::autograd::impl::try_get_grad_accumulator(input).get();
    }
    for (size_t i = 0; i < params.size(); ++i) {
      if (auto acc = torch::autograd::impl::try_get_grad_accumulator(params[i])) weight_of_[acc.get()] = i;
    }
  }

  bool reaches_input(Node* node) {
    if (input_ == nullptr) return false;
    if (node == input_) return true;
    const auto known = reaches_.find(node);
    if (known != reaches_.end()) return known->second;
    bool reaches = false;
    for (const Edge& e : node->next_edges()) {
      if (e.function && reaches_input(e.function.get())) reaches = true;
    }
    return reaches_[node] = reaches;
  }

  // The weight whose accumulator `node` is, if any.
  std::optional<size_t> weight_of(Node* node) const {
    const auto found = weight_of_.find(node);
    return found == weight_of_.end() ? std::nullopt : std::optional<size_t>(found->second);
  }

  // Weights below a node off the input path.
  const std::set<size_t>& weights_below(Node* node) {
    const auto known = below_.find(node);
    if (known != below_.end()) return known->second;
    std::set<size_t> found;
    if (const auto weight = weight_of(node)) found.insert(*weight);
    for (const Edge& e : node->next_edges()) {
      if (!e.function) continue;
      const auto& more = weights_below(e.function.get());
      found.insert(more.begin(), more.end());
    }
    return below_[node] = std::move(found);
  }

  // Every node below the roots, each once.
  std::vector<std::shared_ptr<Node>> nodes(const std::vector<torch::Tensor>& roots) const {
    std::vector<std::shared_ptr<Node>> order, stack;
    std::set<Node*> seen;
    for (const auto& r : roots) {
      if (r.grad_fn() && seen.insert(r.grad_fn().get()).second) stack.push_back(r.grad_fn());
    }
    while (!stack.empty()) {
      auto node = stack.back();
      stack.pop_back();
      order.push_back(node);
      for (const Edge& e : node->next_edges()) {
        if (e.function && seen.insert(e.function.get()).second) stack.push_back(e.function);
      }
    }
    return order;
  }

 private:
  Node* input_ = nullptr;
  std::map<Node*, size_t> weight_of_;
  std::map<Node*, bool> reaches_;
  std::map<Node*, std::set<size_t>> below_;
};

}  // namespace

// The junctions, each with the edges of its own that lead down the input path; the weights
// reached only off it (none on a stage whose input carries a gradient).
SplitBackward::Graph SplitBackward::find_junctions(const torch::Tensor& input,
                                                   const std::vector<torch::Tensor>& params) {
  GraphWalk walk(input, params);
  Graph graph;
  std::set<size_t> reached, covered;
  for (const auto& node : walk.nodes(roots_)) {
    if (!walk.reaches_input(node.get())) {
      if (const auto weight = walk.weight_of(node.get())) reached.insert(*weight);
      continue;
    }
    Junction junction{node, {}, std::make_shared<variable_list>()};
    bool leads_to_weights = false;
    const auto& edges = node->next_edges();
    for (size_t k = 0; k < edges.size(); ++k) {
      if (!edges[k].function) continue;
      if (walk.reaches_input(edges[k].function.get())) {
        junction.input_path_edges.push_back(k);
        continue;
      }
      const auto& below = walk.weights_below(edges[k].function.get());
      covered.insert(below.begin(), below.end());
      leads_to_weights = leads_to_weights || !below.empty();
    }
    if (leads_to_weights) graph.junctions.push_back(std::move(junction));
  }
  for (size_t w : reached) (covered.count(w) ? graph.junction_weights : graph.orphan_weights).push_back(params[w]);
  return graph;
}

SplitBackward::SplitBackward(std::vector<torch::Tensor> roots, std::vector<torch::Tensor> grads,
                             torch::Tensor input, std::vector<torch::Tensor> params)
    : roots_(std::move(roots)), grads_(std::move(grads)) {
  graph_ = find_junctions(input, params);
  for (auto& junction : graph_.junctions) {
    junction.node->add_pre_hook(std::make_unique<RecordArrivingGradients>(junction.recorded));
  }
  if (!input.defined() || !input.requires_grad()) return;  // a first stage: nothing to send
  auto input_grad = torch::autograd::grad(roots_, {input}, grads_, /*retain_graph=*/true,
                                          /*create_graph=*/false, /*allow_unused=*/true);
  input.mutable_grad() = input_grad.at(0);
}

void SplitBackward::weight_pass() {
  // Weights off the input path (a first stage: all of them) take the backward from the roots.
  if (!graph_.orphan_weights.empty()) {
    torch::autograd::backward(roots_, grads_, /*retain_graph=*/true, false, graph_.orphan_weights);
  }
  // Cut every junction's edges down the input path: restarted at the junctions with the
  // gradients B recorded there, the engine can then only reach weights, and a junction below
  // another (a weight used twice along the path) receives nothing twice. The graph is discarded
  // after this pass, so the cut harms nothing.
  torch::autograd::edge_list starts, wanted;
  variable_list arriving;
  for (auto& junction : graph_.junctions) {
    const variable_list& grads = *junction.recorded;
    if (grads.empty()) throw std::logic_error("split backward: a junction did not run in B");
    for (size_t k : junction.input_path_edges) junction.node->next_edges()[k] = Edge();
    for (size_t slot = 0; slot < grads.size(); ++slot) {
      if (!grads[slot].defined()) continue;
      starts.emplace_back(junction.node, uint32_t(slot));
      arriving.push_back(grads[slot]);
    }
  }
  for (const auto& w : graph_.junction_weights) wanted.push_back(torch::autograd::impl::gradient_edge(w));
  if (!starts.empty() && !wanted.empty()) {
    torch::autograd::Engine::get_default_engine().execute(
        starts, arriving, /*keep_graph=*/false, /*create_graph=*/false, /*accumulate_grad=*/true, wanted);
  }
  graph_ = Graph{};
  roots_.clear();
  grads_.clear();
}

int64_t SplitBackward::held_gradient_bytes() const {
  int64_t bytes = 0;
  for (const auto& junction : graph_.junctions) {
    for (const auto& g : *junction.recorded) {
      if (g.defined()) bytes += int64_t(g.numel() * g.element_size());
    }
  }
  return bytes;
}

}  // namespace pipetrain::runtime
