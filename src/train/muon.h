#pragma once
// Muon (github.com/KellerJordan/Muon, muon.py) for the hidden weight matrices, AdamW for every
// other parameter (embeddings, the tied head, layer-norm gains, biases), in one optimizer.
// Per hidden matrix W with gradient G (docs/weight-policies.md has the formulas):
//   M <- beta M + (1 - beta) G;  U = (1 - beta) G + beta M (Nesterov);
//   O = NS5(U) * sqrt(max(1, rows / cols));  W <- W (1 - lr wd) - lr O,
// NS5 the Newton-Schulz quintic that maps U = A S B^T to about A B^T. Its state is the momentum
// M, kept as an SGDParamState (checkpoint entry "<parameter>.momentum_buffer"); the AdamW part
// keeps AdamW's own state and names.
#include <vector>

#include <torch/torch.h>

namespace pipetrain {

// The quintic's coefficients (Keller Jordan's): one iteration maps each singular value s of
// X to a s + b s^3 + c s^5.
constexpr double kNewtonSchulzA = 3.4445, kNewtonSchulzB = -4.7750, kNewtonSchulzC = 2.0315;

// `steps` iterations on matrix / (||matrix||_F + 1e-7) (a matrix with more rows than columns
// is iterated transposed): the same singular vectors, singular values pushed towards 1.
// A tensor of more than 2 dims is treated as [size(0), -1]. Runs in the matrix's dtype.
torch::Tensor newton_schulz_orthogonalize(const torch::Tensor& matrix, int steps = 5);

struct MuonOptions : public torch::optim::OptimizerCloneableOptions<MuonOptions> {
  explicit MuonOptions(double lr) : lr_(lr) {}
  // The schedule's learning rate (the one set_learning_rate sets on every group, train.lr's);
  // a Muon step moves by lr * lr_scale, so Muon follows the same warm-up and decay.
  TORCH_ARG(double, lr);
  TORCH_ARG(double, lr_scale) = 1;
  TORCH_ARG(double, momentum) = 0.95;
  TORCH_ARG(double, weight_decay) = 0;
  TORCH_ARG(int64_t, ns_steps) = 5;
  double get_lr() const override { return lr(); }
  void set_lr(const double value) override { lr(value); }
};

class Muon : public torch::optim::Optimizer {
 public:
  // Group 0 is AdamW's (a prediction reads group 0's options), group 1 Muon's.
  Muon(const std::vector<torch::Tensor>& adamw_params, const torch::optim::AdamWOptions& adamw,
       const std::vector<torch::Tensor>& muon_params, const MuonOptions& muon);
  torch::Tensor step(LossClosure closure = nullptr) override;
  bool updates_with_muon(const torch::Tensor& param) const;
  // The update per unit of the schedule's learning rate if the gradient equalled the momentum
  // (then U = M): NS5(M) * shape scale * lr_scale, or the momentum alone (times lr_scale) for
  // `momentum_only`; undefined before the parameter's first update.
  torch::Tensor prediction_direction(const torch::Tensor& param, bool momentum_only);

 private:
  void adamw_step(torch::optim::OptimizerParamGroup& group);
  void muon_step(torch::optim::OptimizerParamGroup& group);
};

}  // namespace pipetrain
