#pragma once
// Zero-bubble's split backward on libtorch autograd. The input pass (B) computes only the gradient
// w.r.t. the chunk's input, the one the previous stage waits for, and keeps the graph; the weight
// pass (W) later computes the weight gradients without redoing B's work.
//
// Weights join the input's path at "junction" nodes (a matmul's backward, a layer norm's, a bias
// add's): nodes from which the input is reachable and which have an edge into a subgraph that
// reaches only weights. B records the gradients arriving at each junction (a pre-hook); W cuts
// the junctions' edges down the input path and restarts the engine once at all junctions with
// those gradients, asking only for the weights, so each junction computes its weight part
// (X^T dY) and nothing flows down the input path again.
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace pipetrain::runtime {

class SplitBackward {
 public:
  // B: sets input.grad() to d(roots)/d(input) given `grads` for the roots. The input is a leaf
  // that requires grad and `params` are the leaves the weight pass fills (accumulating into
  // .grad(), as a full backward would).
  SplitBackward(std::vector<torch::Tensor> roots, std::vector<torch::Tensor> grads,
                torch::Tensor input, std::vector<torch::Tensor> params);
  // W: accumulates every weight gradient; the graph is released when this object goes.
  void weight_pass();
  // Bytes held for W beyond the activations: the gradients recorded at the junctions.
  int64_t held_gradient_bytes() const;

 private:
  struct Junction {
    std::shared_ptr<torch::autograd::Node> node;
    std::vector<size_t> input_path_edges;                    // cut before W
    std::shared_ptr<std::vector<torch::Tensor>> recorded;    // filled by B's pre-hook
  };
  struct Graph {
    std::vector<Junction> junctions;
    std::vector<torch::Tensor> junction_weights;  // W restarts at the junctions for these
    std::vector<torch::Tensor> orphan_weights;    // reached off the input path only: from the roots
  };
  Graph find_junctions(const torch::Tensor& input, const std::vector<torch::Tensor>& params);

  std::vector<torch::Tensor> roots_, grads_;  // the graph stays alive through the roots
  Graph graph_;
};

}  // namespace pipetrain::runtime
