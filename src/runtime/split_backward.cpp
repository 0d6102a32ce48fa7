#include "runtime/split_backward.h"

#include <map>
#include <numeric>
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

struct SplitBackward::Group {
  std::vector<size_t> params;                               // indices into the weight list
  std::vector<torch::Tensor> weights;                       // the same, as tensors
  std::vector<std::shared_ptr<Node>> junctions;
  std::vector<std::shared_ptr<variable_list>> recorded;     // per junction, filled by B
  bool from_roots = false;  // no junction, or junctions on one another's paths
};

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

  // Weights below a node off the input path.
  const std::set<size_t>& weights_below(Node* node) {
    const auto known = below_.find(node);
    if (known != below_.end()) return known->second;
    std::set<size_t> found;
    const auto weight = weight_of_.find(node);
    if (weight != weight_of_.end()) found.insert(weight->second);
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

  // Whether `to` lies below `from` along the input path.
  bool on_input_path_below(Node* from, Node* to) {
    std::vector<Node*> stack{from};
    std::set<Node*> seen{from};
    while (!stack.empty()) {
      Node* node = stack.back();
      stack.pop_back();
      for (const Edge& e : node->next_edges()) {
        Node* next = e.function.get();
        if (next == nullptr || !reaches_input(next) || !seen.insert(next).second) continue;
        if (next == to) return true;
        stack.push_back(next);
      }
    }
    return false;
  }

 private:
  Node* input_ = nullptr;
  std::map<Node*, size_t> weight_of_;
  std::map<Node*, bool> reaches_;
  std::map<Node*, std::set<size_t>> below_;
};

size_t find_root(std::vector<size_t>& parent, size_t i) {
  while (parent[i] != i) i = parent[i] = parent[parent[i]];
  return i;
}

// Junctions and the weights each one leads to; weights reached with no junction go to `orphans`.
std::vector<std::shared_ptr<SplitBackward::Group>> group_weights(
    GraphWalk& walk, const std::vector<torch::Tensor>& roots, const std::vector<torch::Tensor>& params) {
  std::vector<std::pair<std::shared_ptr<Node>, std::set<size_t>>> junctions;
  std::set<size_t> reached, covered;
  for (const auto& node : walk.nodes(roots)) {
    const bool on_path = walk.reaches_input(node.get());
    if (!on_path) {
      const auto& below = walk.weights_below(node.get());
      reached.insert(below.begin(), below.end());
      continue;
    }
    std::set<size_t> weights;
    for (const Edge& e : node->next_edges()) {
      if (!e.function || walk.reaches_input(e.function.get())) continue;
      const auto& below = walk.weights_below(e.function.get());
      weights.insert(below.begin(), below.end());
    }
    if (weights.empty()) continue;
    covered.insert(weights.begin(), weights.end());
    junctions.emplace_back(node, std::move(weights));
  }
  std::vector<size_t> parent(params.size());
  std::iota(parent.begin(), parent.end(), size_t{0});
  for (const auto& [node, weights] : junctions) {
    for (size_t w : weights) parent[find_root(parent, w)] = find_root(parent, *weights.begin());
  }
  std::map<size_t, std::shared_ptr<SplitBackward::Group>> by_root;
  auto group_of = [&](size_t weight) -> SplitBackward::Group& {
    auto& group = by_root[find_root(parent, weight)];
    if (!group) group = std::make_shared<SplitBackward::Group>();
    return *group;
  };
  for (const auto& [node, weights] : junctions) group_of(*weights.begin()).junctions.push_back(node);
  for (size_t w : reached) {
    auto& group = group_of(w);
    group.params.push_back(w);
    group.weights.push_back(params[w]);
    if (!covered.count(w)) group.from_roots = true;
  }
  std::vector<std::shared_ptr<SplitBackward::Group>> groups;
  for (auto& [root, group] : by_root) {
    for (size_t a = 0; a < group->junctions.size() && !group->from_roots; ++a) {
      for (size_t b = 0; b < group->junctions.size(); ++b) {
        if (a != b && walk.on_input_path_below(group->junctions[a].get(), group->junctions[b].get())) {
          group->from_roots = true;
        }
      }
    }
    groups.push_back(group);
  }
  return groups;
}

}  // namespace

SplitBackward::SplitBackward(std::vector<torch::Tensor> roots, std::vector<torch::Tensor> grads,
                             torch::Tensor input, std::vector<torch::Tensor> params)
    : roots_(std::move(roots)), grads_(std::move(grads)) {
  GraphWalk walk(input, params);
  groups_ = group_weights(walk, roots_, params);
  for (auto& group : groups_) {
    if (group->from_roots) continue;
    for (auto& junction : group->junctions) {
      auto into = std::make_shared<variable_list>();
      junction->add_pre_hook(std::make_unique<RecordArrivingGradients>(into));
      group->recorded.push_back(into);
    }
  }
  if (!input.defined() || !input.requires_grad()) return;  // a first stage: nothing to send
  auto input_grad = torch::autograd::grad(roots_, {input}, grads_, /*retain_graph=*/true,
                                          /*create_graph=*/false, /*allow_unused=*/true);
  input.mutable_grad() = input_grad.at(0);
}

void SplitBackward::weight_pass() {
  auto& engine = torch::autograd::Engine::get_default_engine();
  for (auto& group : groups_) {
    if (group->from_roots) {
      torch::autograd::backward(roots_, grads_, /*retain_graph=*/true, false, group->weights);
      continue;
    }
    torch::autograd::edge_list starts, wanted;
    variable_list arriving;
    for (size_t j = 0; j < group->junctions.size(); ++j) {
      const variable_list& grads = *group->recorded.at(j);
      if (grads.empty()) throw std::logic_error("split backward: a junction did not run in B");
      for (size_t slot = 0; slot < grads.size(); ++slot) {
        if (!grads[slot].defined()) continue;
        starts.emplace_back(group->junctions[j], uint32_t(slot));
        arriving.push_back(grads[slot]);
      }
    }
    for (const auto& w : group->weights) wanted.push_back(torch::autograd::impl::gradient_edge(w));
    if (!starts.empty()) {
      engine.execute(starts, arriving, /*keep_graph=*/true, /*create_graph=*/false,
                     /*accumulate_grad=*/true, wanted);
    }
    for (auto& recorded : group->recorded) recorded->clear();
  }
  groups_.clear();
  roots_.clear();
  grads_.clear();
}

int64_t SplitBackward::held_gradient_bytes() const {
  int64_t bytes = 0;
  for (const auto& group : groups_) {
    for (const auto& recorded : group->recorded) {
      for (const auto& g : *recorded) {
        if (g.defined()) bytes += int64_t(g.numel() * g.element_size());
      }
    }
  }
  return bytes;
}

}  // namespace pipetrain::runtime
